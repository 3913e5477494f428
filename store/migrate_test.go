package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestJobKindRenameKeepsQueuedJobs replays migration 010 over jobs an
// earlier version queued under the old kind name: the queued one takes the
// new name (so a worker picks it up), the finished one stays as history.
func TestJobKindRenameKeepsQueuedJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO river.river_job (kind, args, max_attempts, queue, state, finalized_at) VALUES
			('rflow_ledger_cleanup', '{}', 3, 'default', 'available', NULL),
			('rflow_ledger_cleanup', '{}', 3, 'default', 'completed', now())`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM rflow.schema_migrations WHERE version = 10`)
	require.NoError(t, err)
	res, err := store.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	require.Len(t, res.Applied, 1)

	kinds := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT state::text, kind FROM river.river_job WHERE kind LIKE 'rflow%ledger_cleanup'`)
	require.NoError(t, err)
	for rows.Next() {
		var state, kind string
		require.NoError(t, rows.Scan(&state, &kind))
		kinds[state] = kind
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{"available": "rflow.ledger_cleanup", "completed": "rflow_ledger_cleanup"}, kinds)
}
