package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestNodeLiveness: a live node's jobs are never rescued; once its
// connection is gone, its running jobs become available and it is
// forgotten, all without touching other nodes.
func TestNodeLiveness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool2, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool2.Close()

	live, err := store.RegisterNode(ctx, url, "live-client")
	require.NoError(t, err)
	defer live.Close(ctx)
	dead, err := store.RegisterNode(ctx, url, "dead-client")
	require.NoError(t, err)
	for _, client := range []string{"live-client", "dead-client"} {
		_, err := pool2.Exec(ctx, `
			INSERT INTO river.river_job (kind, args, state, attempt, attempted_by, max_attempts, queue, priority, scheduled_at)
			VALUES ('x', '{}', 'running', 1, ARRAY[$1], 5, 'default', 1, now() - interval '1 minute')`, client)
		require.NoError(t, err)
	}

	n, err := store.RescueDeadNodes(ctx, pool2)
	require.NoError(t, err)
	require.Zero(t, n, "both nodes hold their liveness locks")

	dead.Drop() // the process dies: its connection (and lock) go away
	require.Eventually(t, func() bool {
		n, err := store.RescueDeadNodes(ctx, pool2)
		require.NoError(t, err)
		return n == 1
	}, 10e9, 50e6)
	var states []string
	rows, err := pool2.Query(ctx, `SELECT attempted_by[1] || ':' || state FROM river.river_job ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		states = append(states, s)
	}
	require.Equal(t, []string{"dead-client:available", "live-client:running"}, states)
	var nodes int
	require.NoError(t, pool2.QueryRow(ctx, `SELECT count(*) FROM rflow.nodes`).Scan(&nodes))
	require.Equal(t, 1, nodes)
}
