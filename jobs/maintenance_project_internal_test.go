package jobs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// Each project's processes enqueue its maintenance into its own queue, one
// job of a kind at a time per queue however many processes tick: a project
// never depends on River's one leader being one of its own processes.
func TestProjectMaintenanceIsOneJobPerQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	var engines []*Engine
	for _, p := range []string{"alpha", "beta", "beta"} { // two processes of beta
		ns, err := store.RegisterProject(ctx, pool, p)
		require.NoError(t, err)
		e, err := NewEngine(Config{Pool: pool, Project: &workflow.Project{Name: p}, Namespace: ns})
		require.NoError(t, err)
		engines = append(engines, e)
	}
	for range 2 {
		for _, e := range engines {
			_, err := e.client.InsertMany(ctx, e.maintenanceJobs())
			require.NoError(t, err)
		}
	}
	got := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT queue || ' ' || kind, count(*) FROM river.river_job GROUP BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		got[k] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"default rflow.repair": 1, "project_beta rflow.repair": 1}, got)
}
