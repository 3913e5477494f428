package jobs_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/rehearsal"
	"github.com/rflow-dev/rflow/store"
)

// A live engine never runs a namespaced workflow: a claim for one (say a
// POST to /v1/workflows/test_…/runs) fails and leaves no run, and looking
// it up (a webhook) finds nothing. A rehearsal engine, in turn, refuses a
// live workflow.
func TestLiveEngineRefusesRehearsals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, `
name: scoped
workflows:
  - name: wf
    trigger: { manual: {} }
    steps: [ { id: a, http_call: { url: "{{URL}}/a" } } ]
`)
	pool, e := b.pool, b.engine
	wf := b.project.Workflow("wf")
	ns := rehearsal.TestName(uuid.New(), "wf")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.DeployWorkflow(ctx, tx, ns, wf.Hash, wf.Spec)
		return err
	}))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, _, err := e.StartRunTx(ctx, tx, store.ManualClaim(ns, "k", nil))
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "a live process never runs")
	_, err = e.Workflow(ctx, ns)
	require.ErrorIs(t, err, store.ErrNotFound)
	var runs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&runs))
	require.Zero(t, runs)

	schema := "rehearsal_" + uuid.New().String()[:8] + "000000000000000000000000"
	require.NoError(t, store.CreateRehearsalRiver(ctx, pool, schema))
	t.Cleanup(func() { _ = store.DropRehearsalRiver(context.Background(), pool, schema) })
	r, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: b.project, Rehearsal: &jobs.Rehearsal{RiverSchema: schema,
		Send: func(context.Context, jobs.SendCapture) (map[string]any, error) { return nil, nil }}})
	require.NoError(t, err)
	_, err = r.Workflow(ctx, "wf")
	require.ErrorContains(t, err, "a rehearsal never runs a live workflow")
	got, err := r.Workflow(ctx, ns)
	require.NoError(t, err)
	require.Equal(t, ns, got.Name, "guards and budgets key on the namespaced name")
}
