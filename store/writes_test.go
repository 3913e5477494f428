package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// A journal row is created once: whether it goes in alone (a step's one
// successor) or with others, a replayed write reports it as not created,
// so the caller enqueues its job once.
func TestInsertStepsReportsOnlyNewRows(t *testing.T) {
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
	id := won[0].ID
	wake := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	one := store.NewStep{RunID: id, Key: "a", StepID: "a", Kind: "delay", Status: store.StepWaiting, WakeAt: &wake,
		Input: []byte(`{"x":1}`)}
	two := []store.NewStep{
		{RunID: id, Key: "a", StepID: "a", Kind: "delay", Status: store.StepWaiting},
		{RunID: id, Key: "b", StepID: "b", Kind: "if", Status: store.StepSkipped},
	}
	write := func(steps ...store.NewStep) map[store.StepRef]bool {
		created := map[store.StepRef]bool{}
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			w := &store.Writes{}
			w.InsertSteps(steps, created)
			ok, err := w.Send(ctx, tx)
			require.True(t, ok)
			return err
		}))
		return created
	}
	a, b := store.StepRef{RunID: id, Key: "a"}, store.StepRef{RunID: id, Key: "b"}
	require.Equal(t, map[store.StepRef]bool{a: true}, write(one))
	require.Empty(t, write(one))
	require.Equal(t, map[store.StepRef]bool{b: true}, write(two...))
	require.Empty(t, write(two...))

	steps, err := store.RunSteps(ctx, pool, id)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, store.StepWaiting, steps[0].Status)
	require.JSONEq(t, `{"x":1}`, string(steps[0].Input))
	require.True(t, wake.Equal(*steps[0].WakeAt))
	require.Nil(t, steps[0].FinishedAt)
	require.Equal(t, store.StepSkipped, steps[1].Status)
	require.NotNil(t, steps[1].FinishedAt, "a skipped step is finished when journaled")
}

// Many runs' new states go in as one statement with UpdateRun's fence:
// each run's state is written as given, and a run at another attempt, or
// already finished, makes the whole write report moved (the caller rolls
// back), as one UpdateRun per run would.
func TestUpdateRunsWritesEachAndFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1)`)
	require.NoError(t, err)
	var won []store.ClaimedRun
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		won, err = store.ClaimRuns(ctx, tx, []store.Claim{
			{Workflow: "wf", TriggerKey: "a", TriggerKind: "manual"},
			{Workflow: "wf", TriggerKey: "b", TriggerKind: "manual"},
			{Workflow: "wf", TriggerKey: "c", TriggerKind: "manual"},
		})
		return err
	}))
	require.Len(t, won, 3)
	wake := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	msg := "boom"
	changes := []store.RunChange{
		{ID: won[0].ID, Attempt: 1, RunUpdate: store.RunUpdate{Status: store.RunWaitingDelay, Position: "later", WakeAt: &wake}},
		{ID: won[1].ID, Attempt: 1, RunUpdate: store.RunUpdate{Status: store.RunFailed, Error: &msg, FailedStep: &msg, Epoch: 2}},
	}
	send := func(changes []store.RunChange) bool {
		var ok bool
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			w := &store.Writes{}
			w.UpdateRuns(changes)
			require.Equal(t, 1, w.Len(), "one statement for all")
			ok, err = w.Send(ctx, tx)
			return err
		}))
		return ok
	}
	require.True(t, send(changes))
	a, err := store.GetRun(ctx, pool, won[0].ID, false)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingDelay, a.Status)
	require.True(t, wake.Equal(*a.WakeAt))
	require.Nil(t, a.FinishedAt)
	b, err := store.GetRun(ctx, pool, won[1].ID, false)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, b.Status)
	require.Equal(t, "boom", *b.Error)
	require.Equal(t, 2, b.Epoch)
	require.NotNil(t, b.FinishedAt)

	// b is finished and c is at attempt 1, not 2: either fences the write.
	require.False(t, send([]store.RunChange{
		{ID: won[0].ID, Attempt: 1, RunUpdate: store.RunUpdate{Status: store.RunRunning}},
		{ID: won[1].ID, Attempt: 1, RunUpdate: store.RunUpdate{Status: store.RunRunning}},
	}))
	require.False(t, send([]store.RunChange{
		{ID: won[0].ID, Attempt: 1, RunUpdate: store.RunUpdate{Status: store.RunRunning}},
		{ID: won[2].ID, Attempt: 2, RunUpdate: store.RunUpdate{Status: store.RunRunning}},
	}))
}
