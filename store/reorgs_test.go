package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestReorgResponsesOncePerRunAndFork: a (run, fork) gets one response; a
// second reorg at the same fork opens none while the first is pending or
// compensating, but reopens one that ended reincluded. Only event runs get
// responses. A claim of the same key re-includes an orphan only while its
// response is pending.
func TestReorgResponsesOncePerRunAndFork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1)`)
	require.NoError(t, err)
	ev := store.Claim{Workflow: "wf", TriggerKey: "1:0xabc:0", TriggerKind: "event", ChainID: 1, BlockNumber: 7, BlockHash: "0xold"}
	blk := store.Claim{Workflow: "wf", TriggerKey: "7", TriggerKind: "block", ChainID: 1, BlockNumber: 7, BlockHash: "0xold"}
	tx := func(fn func(pgx.Tx) error) { require.NoError(t, pgx.BeginFunc(ctx, pool, fn)) }
	var runs []uuid.UUID
	tx(func(tx pgx.Tx) error {
		won, err := store.ClaimRuns(ctx, tx, []store.Claim{ev, blk})
		for _, w := range won {
			runs = append(runs, w.ID)
		}
		return err
	})
	require.Len(t, runs, 2)
	open := func() []uuid.UUID {
		var ids []uuid.UUID
		tx(func(tx pgx.Tx) error {
			var err error
			ids, err = store.OpenResponses(ctx, tx, store.ReorgResponses{ChainID: 1, ForkBlock: 7, Depth: 1, OldHash: "0xold",
				Confirmations: 2}, runs)
			return err
		})
		return ids
	}
	first := open()
	require.Len(t, first, 1, "only the event run gets a response")
	resp, err := store.GetResponse(ctx, pool, first[0], false)
	require.NoError(t, err)
	require.Equal(t, store.RunPending, resp.Status)
	require.Equal(t, int64(9), resp.DecideAt, "fork + confirmations")
	require.Empty(t, open(), "pending: no second response for the same fork")

	var back store.Reincluded
	reinclude := func() int {
		tx(func(tx pgx.Tx) error {
			again := ev
			again.BlockNumber, again.BlockHash = 8, "0xnew"
			var err error
			back, err = store.ReincludeRuns(ctx, tx, []store.Claim{again})
			return err
		})
		return back.Pending
	}
	_, err = pool.Exec(ctx, `UPDATE rflow.workflow_runs SET orphaned_at = now()`)
	require.NoError(t, err)
	require.Equal(t, 1, reinclude(), "pending: the log's claim un-orphans the run")
	run, err := store.GetRun(ctx, pool, runs[0], false)
	require.NoError(t, err)
	require.Nil(t, run.OrphanedAt)
	require.Equal(t, int64(8), *run.BlockNumber)

	tx(func(tx pgx.Tx) error {
		ok, err := store.EndResponse(ctx, tx, first[0], false)
		require.True(t, ok)
		return err
	})
	reopened := open()
	require.Equal(t, first, reopened, "a reincluded (run, fork) orphaned again is pending once more")

	tx(func(tx pgx.Tx) error {
		ok, err := store.EndResponse(ctx, tx, first[0], true)
		require.True(t, ok)
		return err
	})
	require.Empty(t, open(), "a compensating response is never opened twice")
	_, err = pool.Exec(ctx, `UPDATE rflow.workflow_runs SET orphaned_at = now()`)
	require.NoError(t, err)
	require.Zero(t, reinclude(), "decided: no pending response ends")
	require.Len(t, back.Late, 1, "decided: a late re-inclusion")
	require.Equal(t, runs[0], back.Late[0].RunID)
	require.Equal(t, first[0], back.Late[0].ResponseID)
	require.False(t, back.Late[0].Stopped, "the decision did not cancel this run")
	run, err = store.GetRun(ctx, pool, runs[0], false)
	require.NoError(t, err)
	require.Nil(t, run.OrphanedAt, "the log is back: not an orphan")
	var reincludedAt *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT reincluded_at FROM rflow.reorg_runs WHERE id = $1`, first[0]).Scan(&reincludedAt))
	require.NotNil(t, reincludedAt, "the decided response records the re-inclusion")
	compensated, err := store.ListRuns(ctx, pool, store.RunFilter{Compensated: true})
	require.NoError(t, err)
	require.Len(t, compensated, 1)
	require.Equal(t, runs[0], compensated[0].ID)
}
