package relayer_test

import (
	"context"
	"fmt"
	"math/big"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/relayer"
)

// pendingCounter counts eth_getTransactionCount(pending) calls.
type pendingCounter struct {
	*ethclient.Client
	calls atomic.Int64
}

func (p *pendingCounter) PendingNonceAt(ctx context.Context, a common.Address) (uint64, error) {
	p.calls.Add(1)
	return p.Client.PendingNonceAt(ctx, a)
}

// On a chain that mines at once, a send is broadcast, found mined and
// finished by its job's first run, and the acceptance is still recorded.
func TestAutominedSendFinishesInItsFirstRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	got, _ := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: freshAddress(t), Value: big.NewInt(3)})
	got = tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.True(t, got.Accepted, "the node's acceptance is recorded with the final write")
	bs, err := tb.r.Broadcasts(ctx, got.TxID)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.True(t, bs[0].Sent)
	require.Equal(t, got.Hash, bs[0].Hash)

	var fetches int
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT cardinality(attempted_by) FROM river.river_job
		WHERE kind = 'relayer_send' AND args->>'tx_id' = $1`, got.TxID.String()).Scan(&fetches))
	require.Equal(t, 1, fetches, "one job run per send")
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))
}

// A duplicate QueueTx leaves exactly one job for the send.
func TestQueueTxDuplicateLeavesOneJob(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	first, created := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: freshAddress(t), Value: big.NewInt(1)})
	require.True(t, created)
	_, created = tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: freshAddress(t), Value: big.NewInt(2)})
	require.False(t, created)
	var jobs int
	var jobID int64
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT count(*), max(id) FROM river.river_job WHERE kind = 'relayer_send'`).
		Scan(&jobs, &jobID))
	require.Equal(t, 1, jobs)
	var driver int64
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT job_id FROM relayer.transactions WHERE tx_id = $1`, first.TxID).Scan(&driver))
	require.Equal(t, jobID, driver, "the send is driven by the job that is left")
}

// A burst of sends from one wallet asks the node for the pending nonce
// once, not once per send; a key used outside rflow right after (within
// the window the stored nonce is trusted) is still healed: the next send
// is refused for its nonce and moves to a fresh one, one transaction each.
func TestBurstTrustsStoredNonceAndHealsOutsideUse(t *testing.T) {
	t.Parallel()
	counter := &pendingCounter{}
	tb := setup(t, setupOpts{backend: func(c *ethclient.Client) relayer.Backend { counter.Client = c; return counter }})
	ctx := context.Background()
	const burst = 8
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		for i := range burst {
			if _, _, err := tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: ext(t, i), Wallet: "ops", ChainID: chainID,
				To: freshAddress(t), Value: big.NewInt(1)}); err != nil {
				return err
			}
		}
		return nil
	}))
	nonces := map[uint64]bool{}
	for i := range burst {
		got := tb.waitFinal(t, ext(t, i))
		require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
		nonces[*got.Nonce] = true
	}
	require.Len(t, nonces, burst)
	require.Equal(t, uint64(burst), tb.nonce(t))
	require.Less(t, counter.calls.Load(), int64(burst), "the stored next nonce serves the burst")

	// The same key sends at the next nonce without rflow, and a send
	// follows at once.
	tb.sendOutside(t, burst, gwei(1))
	waitFor(t, "outside send mined", func() bool { return tb.nonce(t) == burst+1 })
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 100), To: to, Value: big.NewInt(7)})
	got := tb.waitFinal(t, ext(t, 100))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, uint64(burst+1), *got.Nonce, fmt.Sprintf("moved past the outsider's nonce: %+v", got))
	require.Equal(t, int64(7), tb.balance(t, to).Int64())
	require.Equal(t, uint64(burst+2), tb.nonce(t))
}
