package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// Runs whose River jobs were deleted (in River UI, or lost in a restore)
// while no process ran are found by rflow start's scan at boot and run,
// each step once; runs show says they were repaired.
func TestStartRepairsRunsWhoseJobsWereDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSink(t)
	config := writeProject(t, "manual: {}", s.URL)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	enqueueManual(t, pool, config, 3)
	tag, err := pool.Exec(ctx, `DELETE FROM river.river_job WHERE kind LIKE 'rflow.step%'`)
	require.NoError(t, err)
	require.Equal(t, int64(3), tag.RowsAffected())

	p := startRflow(t, dbURL, config, "")
	defer p.stop(t)
	var ids []uuid.UUID
	require.Eventually(t, func() bool {
		ids = ids[:0]
		rows, err := pool.Query(ctx, `SELECT id FROM rflow.workflow_runs WHERE status = 'completed'`)
		require.NoError(t, err)
		for rows.Next() {
			var id uuid.UUID
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return len(ids) == 3
	}, 60*time.Second, 100*time.Millisecond, "output:\n%s", p.out)
	for key, n := range s.counts() {
		require.Equal(t, 1, n, "call %s made once", key)
	}
	require.Len(t, s.counts(), 3*(1+3+1), "every step of every run ran")
	out, _, code := rflowCmd(t, "--database-url", dbURL, "runs", "show", ids[0].String(), "-c", config)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "repaired")
	require.True(t, strings.Contains(out, "step a (attempt 1) had lost its River job"), out)
}
