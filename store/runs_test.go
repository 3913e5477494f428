package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// Rows written before errors were masked on write (or by any other writer)
// still reach readers without the URL credentials they hold.
func TestJournalErrorsAreMaskedOnRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1)`)
	require.NoError(t, err)
	var won []store.ClaimedRun
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		won, err = store.ClaimRuns(ctx, tx, []store.Claim{{Workflow: "wf", TriggerKey: "k", TriggerKind: "manual"}})
		return err
	}))
	require.Len(t, won, 1)
	id := won[0].ID
	const leaked = `GET https://ops:hunter2@api.example/x?token=SECRET: Get "https://ops:***@api.example/x?token=SECRET": refused`
	const masked = `GET https://ops:xxxxx@api.example/x?token=xxxxx: Get "https://ops:xxxxx@api.example/x?token=xxxxx": refused`
	_, err = pool.Exec(ctx, `UPDATE rflow.workflow_runs SET status = 'failed', error = 'step call: ' || $2 WHERE id = $1`, id, leaked)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO rflow.step_runs (run_id, step_key, step_id, kind, status, error)
		VALUES ($1, 'call', 'call', 'http_call', 'failed', $2)`, id, leaked)
	require.NoError(t, err)

	run, err := store.GetRun(ctx, pool, id, false)
	require.NoError(t, err)
	require.Equal(t, "step call: "+masked, *run.Error)
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Status: "failed"})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "step call: "+masked, *runs[0].Error)
	steps, err := store.RunSteps(ctx, pool, id)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, masked, *steps[0].Error)
	run, steps, err = store.RunWithSteps(ctx, pool, id)
	require.NoError(t, err)
	require.Equal(t, "step call: "+masked, *run.Error)
	require.Equal(t, masked, *steps[0].Error)
}
