package relayer_test

import (
	"context"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// estimateCounter is a node that answers eth_estimateGas slowly (as a
// remote one would), counting the estimates and the requests they take.
type estimateCounter struct {
	*ethclient.Client
	requests, estimates, largest atomic.Int64
}

func (c *estimateCounter) count(n int64) {
	c.requests.Add(1)
	c.estimates.Add(n)
	if n > c.largest.Load() {
		c.largest.Store(n)
	}
	time.Sleep(20 * time.Millisecond)
}

func (c *estimateCounter) BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error {
	var n int64
	for _, e := range batch {
		if e.Method == "eth_estimateGas" {
			n++
		}
	}
	if n > 0 {
		c.count(n)
	}
	return c.Client.Client().BatchCallContext(ctx, batch)
}

func (c *estimateCounter) EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error) {
	c.count(1)
	return c.Client.EstimateGas(ctx, msg)
}

// The first runs of a burst of sends ask the node for their gas estimates
// together: fewer requests than sends, each estimate still its own. A send
// that reverts in a shared request fails with its own reason and takes no
// nonce; the others are confirmed once.
func TestBurstEstimatesShareRequests(t *testing.T) {
	t.Parallel()
	var node *estimateCounter
	tb := setup(t, setupOpts{noClient: true, backend: func(c *ethclient.Client) relayer.Backend {
		node = &estimateCounter{Client: c}
		return node
	}})
	ctx := context.Background()
	em := anviltest.DeployEmitter(t, tb.node)
	reverts, err := em.ABI.Pack("refund", freshAddress(t), big.NewInt(5000))
	require.NoError(t, err)
	to := freshAddress(t)
	const sends = 24
	reverting := func(i int) bool { return i%4 == 3 }
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		for i := range sends {
			req := relayer.Request{ExternalID: ext(t, i), Wallet: "ops", ChainID: chainID, To: to, Value: big.NewInt(1)}
			if reverting(i) {
				req = relayer.Request{ExternalID: ext(t, i), Wallet: "ops", ChainID: chainID, To: em.Address, Data: reverts}
			}
			if _, _, err := tb.r.QueueTx(ctx, tx, req); err != nil {
				return err
			}
		}
		return nil
	}))
	tb.startClient(t, tb.r)
	ok := 0
	for i := range sends {
		got := tb.waitFinal(t, ext(t, i))
		if reverting(i) {
			require.Equal(t, relayer.StatusFailed, got.Status)
			require.Equal(t, "execution reverted: insufficient assets", got.Error)
			require.Nil(t, got.Nonce)
			continue
		}
		require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
		require.Equal(t, 1, tb.finalCalls(ext(t, i)))
		ok++
	}
	require.Equal(t, uint64(ok), tb.nonce(t), "one transaction per send that passed")
	require.Equal(t, int64(ok), tb.balance(t, to).Int64())
	require.GreaterOrEqual(t, node.estimates.Load(), int64(sends))
	require.Greater(t, node.largest.Load(), int64(1), "some estimates shared a request")
	require.Less(t, node.requests.Load(), int64(sends), "fewer requests than sends")
}
