package rpcbatch_test

import (
	"context"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcbatch"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
)

func blocks(n int) ([]rpc.BatchElem, []*struct{ Number hexutil.Uint64 }) {
	elems := make([]rpc.BatchElem, n)
	out := make([]*struct{ Number hexutil.Uint64 }, n)
	for i := range elems {
		elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.EncodeUint64(uint64(i)), false}, Result: &out[i]}
	}
	return elems, out
}

// Against each way a node refuses a batch over 10 calls, a batch of 25
// is answered whole, every call once after the refused batches, and the
// size learned holds for the next batch: it is not refused again.
func TestBatchesShrinkOnEachRefusal(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	node.Mine(30)
	for name, style := range map[string]rpcproxy.BatchStyle{"geth": rpcproxy.BatchTooLarge, "whole": rpcproxy.BatchWhole,
		"truncate": rpcproxy.BatchTruncate} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := rpcproxy.Start(t, node.URL)
			p.Set(rpcproxy.Faults{BatchLimit: 10, BatchStyle: style})
			c, err := rpc.Dial(p.URL)
			require.NoError(t, err)
			defer c.Close()
			var size rpcbatch.Size
			elems, got := blocks(25)
			require.NoError(t, size.Call(context.Background(), c, elems))
			for i, e := range elems {
				require.NoError(t, e.Error, "call %d", i)
				require.EqualValues(t, i, got[i].Number)
			}
			require.LessOrEqual(t, size.Learned(), 10)
			require.Positive(t, size.Learned())
			refused := p.Refused(rpcproxy.RefusedBatch)
			require.Positive(t, refused)
			answered := p.Calls("eth_getBlockByNumber")
			if style == rpcproxy.BatchTruncate {
				require.Equal(t, 10, size.Learned(), "a node answering the first 10 said its limit")
			}

			elems, _ = blocks(25)
			require.NoError(t, size.Call(context.Background(), c, elems))
			require.Equal(t, refused, p.Refused(rpcproxy.RefusedBatch), "the learned size is kept")
			require.Equal(t, answered+25, p.Calls("eth_getBlockByNumber"), "each call once")
		})
	}
}

// A provider that takes no batches at all still answers: batches shrink
// to single calls.
func TestBatchesShrinkToSingleCalls(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	node.Mine(5)
	p := rpcproxy.Start(t, node.URL)
	p.Set(rpcproxy.Faults{BatchLimit: 1, BatchStyle: rpcproxy.BatchWhole})
	c, err := rpc.Dial(p.URL)
	require.NoError(t, err)
	defer c.Close()
	var size rpcbatch.Size
	elems, got := blocks(5)
	require.NoError(t, size.Call(context.Background(), c, elems))
	for i, e := range elems {
		require.NoError(t, e.Error)
		require.EqualValues(t, i, got[i].Number)
	}
	require.Equal(t, 1, size.Learned())

	// The node's own answer to a call is the call's, not a refusal.
	bad := []rpc.BatchElem{{Method: "eth_getBlockByNumber", Args: []any{"bogus", false}, Result: new(any)},
		{Method: "eth_chainId", Result: new(hexutil.Uint64)}}
	require.NoError(t, size.Call(context.Background(), c, bad))
	require.Error(t, bad[0].Error)
	require.NoError(t, bad[1].Error)
}

// A dropped connection is no refusal: the error comes back, the size
// stays.
func TestBatchTransportFailureIsReturned(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	p := rpcproxy.Start(t, node.URL)
	p.Set(rpcproxy.Faults{Drop: 1})
	c, err := rpc.Dial(p.URL)
	require.NoError(t, err)
	defer c.Close()
	var size rpcbatch.Size
	elems, _ := blocks(4)
	require.Error(t, size.Call(context.Background(), c, elems))
	require.Zero(t, size.Learned())
}
