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

// TestClaimEnqueuesFirstStepJob: the job enqueued with a claim, and each
// successor's, is a rflow.step.first job whose args carry only the run, the
// step and the generation (River indexes every key of every job's args); it
// runs the step once like a step job, and a first-step job that no longer
// holds is a counted no-op.
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
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"rflow.step.first", "rflow.step.first", "rflow.step.first"}, kinds)

	staleBefore := b.engine.Stale.Load()
	_, err = b.engine.Client().Insert(ctx, jobs.FirstStepArgs{RunID: id, StepKey: "a", Generation: 2}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.engine.Stale.Load() > staleBefore }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, b.recv.got("/a"), 1, "the stale first-step job made no call")

	raw, err := json.Marshal(jobs.FirstStepArgs{RunID: id, StepKey: "a", Generation: 1})
	require.NoError(t, err)
	require.NotContains(t, string(raw), "attempt")
}

// TestRetryAttemptIsStepJob: a step's later attempt is a rflow.step job
// carrying its attempts, while first attempts before and after it keep the
// three-key shape.
func TestRetryAttemptIsStepJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, retrying)
	b.recv.mu.Lock()
	b.recv.status["/flaky"] = []int{503}
	b.recv.mu.Unlock()
	run := b.waitRun(t, b.manual(t, "flaky", "r1", nil))
	require.Equal(t, store.RunCompleted, run.Status)

	rows, err := b.pool.Query(ctx, `SELECT kind || ' ' || (args->>'step_key') || ' ' || coalesce(args->>'attempt', '-')
		FROM river.river_job WHERE args @> jsonb_build_object('run_id', $1::uuid) ORDER BY id`, run.ID)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		got = append(got, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"rflow.step.first once -", "rflow.step.first flaky -", "rflow.step flaky 2", "rflow.step.first after -"}, got)
}
