package jobs_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// TestClaimEnqueuesFirstStepJob: the job enqueued with a claim is a
// rflow.step.first job whose args carry only the run, the step and the
// generation (River indexes every key of every job's args); it runs the
// step once like a step job, its successors are rflow.step jobs, and a
// first-step job that no longer holds is a counted no-op.
func TestClaimEnqueuesFirstStepJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, threeSteps)
	id := b.manual(t, "three", "k1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	for _, p := range []string{"/a", "/b", "/c"} {
		require.Len(t, b.recv.got(p), 1, "step %s ran once", p)
	}

	rows, err := b.pool.Query(ctx, `SELECT kind, args FROM river.river_job WHERE args @> jsonb_build_object('run_id', $1::uuid) ORDER BY id`, id)
	require.NoError(t, err)
	var kinds []string
	for rows.Next() {
		var kind string
		var args map[string]any
		require.NoError(t, rows.Scan(&kind, &args))
		kinds = append(kinds, kind)
		if kind == "rflow.step.first" {
			keys := make([]string, 0, len(args))
			for k := range args {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			require.Equal(t, []string{"generation", "run_id", "step_key"}, keys)
			require.Equal(t, "a", args["step_key"])
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"rflow.step.first", "rflow.step", "rflow.step"}, kinds)

	staleBefore := b.engine.Stale.Load()
	_, err = b.engine.Client().Insert(ctx, jobs.FirstStepArgs{RunID: id, StepKey: "a", Generation: 2}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.engine.Stale.Load() > staleBefore }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, b.recv.got("/a"), 1, "the stale first-step job made no call")

	raw, err := json.Marshal(jobs.FirstStepArgs{RunID: id, StepKey: "a", Generation: 1})
	require.NoError(t, err)
	require.NotContains(t, string(raw), "attempt")
}
