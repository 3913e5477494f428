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
