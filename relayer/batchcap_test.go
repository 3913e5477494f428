package relayer_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store/storetest"
)

// A burst of sends goes through a node that refuses batches over 4 calls,
// each way nodes refuse them, through rflow's own client (chain.Eth) and
// through a bare ethclient: every send is broadcast and confirmed once,
// its hook run once, and after the first refusal no batch is over the
// limit (the size that worked is kept for broadcasts and receipts alike).
func TestBurstThroughBatchCappedNode(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		style rpcproxy.BatchStyle
		eth   bool
	}{
		"geth/chain.Eth":     {rpcproxy.BatchTooLarge, true},
		"whole/chain.Eth":    {rpcproxy.BatchWhole, true},
		"truncate/chain.Eth": {rpcproxy.BatchTruncate, true},
		"geth/ethclient":     {rpcproxy.BatchTooLarge, false},
		"truncate/ethclient": {rpcproxy.BatchTruncate, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const limit, sends = 4, 16
			tb := setup(t, setupOpts{noClient: true})
			proxy := rpcproxy.Start(t, tb.node.URL)
			proxy.Set(rpcproxy.Faults{BatchLimit: limit, BatchStyle: tc.style})
			var b relayer.Backend
			if tc.eth {
				c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{proxy.URL}})
				require.NoError(t, err)
				t.Cleanup(c.Close)
				b = c.Eth()
			} else {
				c, err := ethclient.Dial(proxy.URL)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				b = c
			}
			tb.r = tb.newRelayer(t, relayer.Config{Networks: map[uint64]relayer.Backend{chainID: b}})
			tb.startClient(t, tb.r)
			tb.confirmedOnce(t, tb.queueAll(t, sends))
			require.Equal(t, sends, proxy.Relayed("eth_sendRawTransaction"), "each send broadcast once")

			over := 0
			for _, n := range proxy.Batches() {
				if n > limit {
					over++
				}
			}
			require.Equal(t, over, proxy.Refused(rpcproxy.RefusedBatch))
			require.Positive(t, over, "the burst was batched and refused")
			require.LessOrEqual(t, over, 2, "the size that worked is kept: %v", proxy.Batches())
		})
	}
}

// refusalsSeen is chain.Eth, counting the batch elements whose error is
// the node refusing the batch (geth's "batch too large", "response too
// large", no answer) rather than answering the call.
type refusalsSeen struct {
	*chain.Eth
	refusals atomic.Int64
}

func (r *refusalsSeen) BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error {
	err := r.Eth.BatchCallContext(ctx, batch)
	for _, e := range batch {
		if e.Error != nil && (errors.Is(e.Error, rpc.ErrMissingBatchResponse) ||
			strings.Contains(e.Error.Error(), "too large")) {
			r.refusals.Add(1)
		}
	}
	return err
}

// The same burst on geth with --rpc.batch-request-limit 4 and a small
// --rpc.batch-response-max-size, through chain.Eth as rflow start passes
// it: each send is broadcast and confirmed once, and the relayer never
// gets geth's refusal of a batch as a call's answer (before, every batch
// over 4 came back as "batch too large" and missing answers, and each job
// did its send over again on its own).
func TestBurstOnGethBatchLimits(t *testing.T) {
	t.Parallel()
	node := gethtest.Start(t, gethtest.Options{BatchLimit: 4, BatchResponseMax: 2048})
	c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{node.URL}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tb := &testBundle{pool: storetest.Pool(t), eth: node.Client(), finals: map[string]int{}, keyIdx: 1,
		chainID: gethtest.ChainID}
	eth := &refusalsSeen{Eth: c.Eth()}
	tb.r = tb.newRelayer(t, relayer.Config{Networks: map[uint64]relayer.Backend{gethtest.ChainID: eth}})
	tb.startClient(t, tb.r)
	tb.confirmedOnce(t, tb.queueAll(t, 12))
	require.Zero(t, eth.refusals.Load())
}
