package relayer_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// TestRetrackResendsConfirmedSendsAReorgDropped: two sends are confirmed
// (one confirmation each); a reorg deeper than that replaces the second
// one's block and drops it. Retrack, in the reorg's transaction, hands
// back only the send whose block is no longer the window's: it is sent
// again with its own bytes and ends confirmed once more on the new chain,
// the value paid once; the send still in a canonical block is untouched.
func TestRetrackResendsConfirmedSendsAReorgDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: time.Hour}})
	to := freshAddress(t)
	kept, dropped := ext(t, 1), ext(t, 2)
	tb.queue(t, relayer.Request{ExternalID: kept, To: to, Value: big.NewInt(5), Confirmations: 1})
	k := tb.waitFinal(t, kept)
	tb.queue(t, relayer.Request{ExternalID: dropped, To: to, Value: big.NewInt(7), Confirmations: 1})
	first := tb.waitFinal(t, dropped)
	require.Equal(t, relayer.StatusConfirmed, first.Status)
	require.Greater(t, first.BlockNumber, k.BlockNumber)
	before := tb.nonce(t)

	tb.node.ReorgWith(int(tb.node.BlockNumber()-first.BlockNumber+1), anviltest.ReorgTx{Raw: tb.filler(t)})
	// The window as the chain service holds it after the reorg: the kept
	// send's block is still canonical, the dropped one's height holds the
	// new block.
	canonical := func(n uint64) string {
		h, err := tb.eth.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		require.NoError(t, err)
		return h.Hash().Hex()
	}
	_, err := tb.pool.Exec(ctx, `INSERT INTO indexer.blocks (chain_id, number, hash, parent_hash) VALUES ($1, $2, $3, ''), ($1, $4, $5, '')`,
		chainID, int64(k.BlockNumber), canonical(k.BlockNumber), int64(first.BlockNumber), canonical(first.BlockNumber))
	require.NoError(t, err)
	require.NotEqual(t, first.BlockHash.Hex(), canonical(first.BlockNumber))
	var n int
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		var err error
		n, err = tb.r.Retrack(ctx, tx, chainID, int64(k.BlockNumber))
		return err
	}))
	require.Equal(t, 1, n, "only the send whose block was replaced")

	got := tb.waitFinal(t, dropped)
	require.Equal(t, first.Hash, got.Hash, "its own bytes")
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.NotEqual(t, first.BlockHash, got.BlockHash)
	require.Equal(t, before, tb.nonce(t), "its nonce used again, by the same transaction")
	require.Equal(t, int64(12), tb.balance(t, to).Int64(), "each paid once")
	orphans, err := tb.r.Orphans(ctx, got.TxID)
	require.NoError(t, err)
	require.Len(t, orphans, 1)
	require.Equal(t, first.BlockHash, orphans[0].BlockHash)
	require.Equal(t, 2, tb.finalCalls(dropped), "the final hook runs again (the engine's is a no-op for a completed step)")
	still, err := tb.r.Get(ctx, kept)
	require.NoError(t, err)
	require.Equal(t, k.BlockHash, still.BlockHash)
	require.Equal(t, 1, tb.finalCalls(kept))
}
