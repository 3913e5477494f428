package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestCursorFencedAndRewoundByReorg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec) VALUES ('wf', 'h', '{}')`)
	require.NoError(t, err)

	ls, err := store.AcquireLeases(ctx, pool, "A", []string{"task"}, time.Minute, 0)
	require.NoError(t, err)
	lease := ls[0]
	start, err := store.EnsureCursor(ctx, pool, "task", "head", 7, -1)
	require.NoError(t, err)
	require.Equal(t, int64(-1), start.Block)

	var blocks []store.IndexedBlock
	for i := int64(0); i <= 10; i++ {
		blocks = append(blocks, store.IndexedBlock{Number: i, Hash: hash("a", i), ParentHash: hash("a", i-1)})
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.AppendBlocks(ctx, tx, 7, blocks, 8) }))
	bottom, err := store.WindowBottom(ctx, pool, 7)
	require.NoError(t, err)
	require.Equal(t, int64(3), bottom, "the window keeps the newest 8 blocks")

	// Claim runs at blocks 8 and 9 and advance the cursor to 10 in one tx.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.LockCursor(ctx, tx, "task", "head")
		require.NoError(t, err)
		_, err = store.ClaimRuns(ctx, tx, []store.Claim{
			{Workflow: "wf", TriggerKey: "k8", TriggerKind: "event", ChainID: 7, BlockNumber: 8, BlockHash: hash("a", 8)},
			{Workflow: "wf", TriggerKey: "k9", TriggerKind: "event", ChainID: 7, BlockNumber: 9, BlockHash: hash("a", 9)},
		})
		require.NoError(t, err)
		return store.AdvanceCursor(ctx, tx, lease, "task", "head", -1, 10)
	}))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.AdvanceCursor(ctx, tx, lease, "task", "head", -1, 11) })
	require.ErrorIs(t, err, store.ErrCursorMoved)

	// Blocks 9 and 10 are replaced: the cursor rewinds to 8, the run at 9 is orphaned.
	canonical := []store.IndexedBlock{
		{Number: 9, Hash: hash("b", 9), ParentHash: hash("a", 8)},
		{Number: 10, Hash: hash("b", 10), ParentHash: hash("b", 9)},
	}
	var orphaned int
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ids, err := store.ApplyReorg(ctx, tx, store.ReorgRecord{ChainID: 7, ForkBlock: 9, Depth: 2,
			OldHash: hash("a", 9), NewHash: hash("b", 9)}, canonical, 8)
		orphaned = len(ids)
		return err
	}))
	require.Equal(t, 1, orphaned)
	cur, err := store.EnsureCursor(ctx, pool, "task", "head", 7, -1)
	require.NoError(t, err)
	require.Equal(t, int64(8), cur.Block)
	var key string
	require.NoError(t, pool.QueryRow(ctx, `SELECT trigger_key FROM rflow.workflow_runs WHERE orphaned_at IS NOT NULL`).Scan(&key))
	require.Equal(t, "k9", key)
	head, ok, err := store.WindowHead(ctx, pool, 7)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, hash("b", 10), head.Hash)
	rs, err := store.Reorgs(ctx, pool, 7, 10)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, int64(9), rs[0].ForkBlock)

	// A taken-over lease can no longer move the cursor.
	_, err = store.RenewLease(ctx, pool, lease, time.Millisecond)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.AdvanceCursor(ctx, tx, lease, "task", "head", 8, 10) })
	require.True(t, errors.Is(err, store.ErrLeaseLost), "expired lease must fence: %v", err)
}

func hash(fork string, n int64) string {
	return fork + ":" + time.Unix(n, 0).UTC().Format("150405")
}
