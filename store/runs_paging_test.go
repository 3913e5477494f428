package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// Pages of ListRuns, followed by their last run, list every run once,
// newest first, including runs that share created_at (one claim batch).
func TestListRunsPagesByKeyset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1)`)
	require.NoError(t, err)
	var batches [][]uuid.UUID
	for b := range 3 {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var claims []store.Claim
			for i := range 4 {
				claims = append(claims, store.Claim{Workflow: "wf", TriggerKey: fmt.Sprint(b, "-", i), TriggerKind: "manual"})
			}
			won, err := store.ClaimRuns(ctx, tx, claims)
			var ids []uuid.UUID
			for _, w := range won {
				ids = append(ids, w.ID)
			}
			batches = append(batches, ids)
			return err
		}))
	}
	var listed []uuid.UUID
	f := store.RunFilter{Limit: 5}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 4)
		runs, err := store.ListRuns(ctx, pool, f)
		require.NoError(t, err)
		for i, r := range runs {
			if len(listed) > 0 && i == 0 {
				prev, err := store.GetRun(ctx, pool, listed[len(listed)-1], false)
				require.NoError(t, err)
				require.False(t, r.CreatedAt.After(prev.CreatedAt), "newest first across pages")
			}
			listed = append(listed, r.ID)
		}
		if len(runs) < f.Limit {
			break
		}
		f.Before = &runs[len(runs)-1].ID
	}
	require.Len(t, listed, 12)
	seen := map[uuid.UUID]bool{}
	for _, id := range listed {
		require.False(t, seen[id], "run %s listed twice", id)
		seen[id] = true
	}
	// The newest batch comes first.
	require.ElementsMatch(t, batches[2], listed[:4])
	require.ElementsMatch(t, batches[0], listed[8:])

	// A limit above the old silent cap of 1000 is honoured.
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 5000})
	require.NoError(t, err)
	require.Len(t, runs, 12)

	missing := uuid.New()
	_, err = store.ListRuns(ctx, pool, store.RunFilter{Before: &missing})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRunsByShortID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1)`)
	require.NoError(t, err)
	var won []store.ClaimedRun
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		won, err = store.ClaimRuns(ctx, tx, []store.Claim{
			{Workflow: "wf", TriggerKey: "a", TriggerKind: "manual"}, {Workflow: "wf", TriggerKey: "b", TriggerKind: "manual"},
		})
		return err
	}))
	short := store.ShortID(won[0].ID)
	require.Len(t, short, store.ShortIDLen)
	require.True(t, len(won[0].ID.String()) > len(short) && won[0].ID.String()[36-store.ShortIDLen:] == short)
	runs, err := store.RunsByShortID(ctx, pool, short, 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, won[0].ID, runs[0].ID)
	runs, err = store.RunsByShortID(ctx, pool, "ffffffff", 10)
	require.NoError(t, err)
	require.Empty(t, runs)
}
