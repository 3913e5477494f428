package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/rehearsal"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// Namespaced workflows stay out of every live listing, and purging one
// deletes its rows and never a live workflow's.
func TestRehearsalNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	ns := rehearsal.TestName(uuid.New(), "wf")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, name := range []string{"wf", ns} {
			if _, err := store.DeployWorkflow(ctx, tx, name, "h", []byte(`{"name":"wf"}`)); err != nil {
				return err
			}
			if _, err := store.ClaimRuns(ctx, tx, []store.Claim{{Workflow: name, TriggerKey: "k", TriggerKind: "manual", Trigger: []byte(`{}`)}}); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE rflow.workflow_runs SET status = 'throttled'`)
		return err
	}))

	wfs, err := store.ListWorkflows(ctx, pool)
	require.NoError(t, err)
	require.Len(t, wfs, 1)
	require.Equal(t, "wf", wfs[0].Name)
	gens, err := store.WorkflowGenerations(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"wf": 1}, gens)
	throttled, err := store.ThrottledWorkflows(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []string{"wf"}, throttled)

	require.ErrorContains(t, store.PurgeNamespace(ctx, pool, "wf"), "refusing to delete a live workflow's rows")
	require.NoError(t, store.PurgeNamespace(ctx, pool, ns))
	var live, left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE workflow_name = 'wf'),
		count(*) FILTER (WHERE workflow_name <> 'wf') FROM rflow.workflow_runs`).Scan(&live, &left))
	require.Equal(t, 1, live)
	require.Zero(t, left)
	_, err = store.GetWorkflow(ctx, pool, ns)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.Error(t, store.CreateRehearsalRiver(ctx, pool, "river"), "only rehearsal_<hex> schemas")
	require.Error(t, store.DropRehearsalRiver(ctx, pool, "river"), "never the live River schema")
}
