package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// jobsOfRun is the kind and args of each River job of run id, oldest
// first: a rflow.step job names its run by the key run_id, a
// rflow.step.first job by the first element of its args.
const jobsOfRun = `SELECT kind, args FROM river.river_job
	WHERE args @> jsonb_build_object('run_id', $1::uuid) OR args ? $1::text ORDER BY id`

// TestClaimEnqueuesFirstStepJob: the job enqueued with a claim, and each
// successor's, is a rflow.step.first job whose args are only
// [run id, "step/generation"] (River indexes every key and value of every
// job's args); it runs the step once like a step job, and a first-step job
// that no longer holds is a counted no-op.
func TestClaimEnqueuesFirstStepJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Successors have jobs of their own when no job carries them
	// (step_carry_test.go tests carrying).
	b := setupWith(t, threeSteps, jobs.Config{NoInline: true})
	id := b.manual(t, "three", "k1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	for _, p := range []string{"/a", "/b", "/c"} {
		require.Len(t, b.recv.got(p), 1, "step %s ran once", p)
	}

	rows, err := b.pool.Query(ctx, jobsOfRun, id)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var kind string
		var args json.RawMessage
		require.NoError(t, rows.Scan(&kind, &args))
		got = append(got, kind+" "+string(args))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		`rflow.step.first ["` + id.String() + `", "a/1"]`,
		`rflow.step.first ["` + id.String() + `", "b/1"]`,
		`rflow.step.first ["` + id.String() + `", "c/1"]`,
	}, got)

	staleBefore := b.engine.Stale.Load()
	_, err = b.engine.Client().Insert(ctx, jobs.FirstStepArgs{RunID: id, StepKey: "a", Generation: 2}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.engine.Stale.Load() > staleBefore }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, b.recv.got("/a"), 1, "the stale first-step job made no call")
}

// FirstStepArgs reads back what it writes, and nothing else: args of
// another shape are an error, never a step of some other run or
// generation.
func TestFirstStepArgsDecoding(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0193e7a4-5b6c-7d8e-9f00-112233445566")
	for _, a := range []jobs.FirstStepArgs{
		{RunID: id, StepKey: "tell", Generation: 1},
		{RunID: id, StepKey: "items[3]", Generation: 12},
		{RunID: id, StepKey: "retry@2", Generation: 9_000_000_000},
	} {
		raw, err := json.Marshal(a)
		require.NoError(t, err)
		var back jobs.FirstStepArgs
		require.NoError(t, json.Unmarshal(raw, &back), "%s", raw)
		require.Equal(t, a, back)
	}
	raw, err := json.Marshal(jobs.FirstStepArgs{RunID: id, StepKey: "tell", Generation: 3})
	require.NoError(t, err)
	require.JSONEq(t, `["0193e7a4-5b6c-7d8e-9f00-112233445566", "tell/3"]`, string(raw))

	for raw, want := range map[string]string{
		`{"run_id": "0193e7a4-5b6c-7d8e-9f00-112233445566", "step_key": "tell", "generation": 1}`: `want [run id, "step/generation"]`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566"]`:                                                `want [run id, "step/generation"]`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", "tell/1", "x"]`:                                 `want [run id, "step/generation"]`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", 1]`:                                             `want [run id, "step/generation"]`,
		`["not-a-run", "tell/1"]`:                                                                 `run id`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", "tell"]`:                                        `want "step/generation"`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", "/1"]`:                                          `want "step/generation"`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", "tell/"]`:                                       `generation "" is not a positive integer`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", "tell/0"]`:                                      `generation "0" is not a positive integer`,
		`["0193e7a4-5b6c-7d8e-9f00-112233445566", "tell/x1"]`:                                     `generation "x1" is not a positive integer`,
		`null`: `want [run id, "step/generation"]`,
	} {
		var a jobs.FirstStepArgs
		err := json.Unmarshal([]byte(raw), &a)
		require.ErrorContains(t, err, want, "%s", raw)
		require.ErrorContains(t, err, "rflow.step.first args")
	}
}

// rawFirstStep is a rflow.step.first job with whatever args a test gives.
type rawFirstStep struct{ raw json.RawMessage }

func (rawFirstStep) Kind() string                   { return "rflow.step.first" }
func (a rawFirstStep) MarshalJSON() ([]byte, error) { return a.raw, nil }

// A rflow.step.first job whose args do not parse (written by hand, or by
// a build of another shape) fails its attempt with the reason on the job,
// where River UI shows it, and runs no step.
func TestMalformedFirstStepArgsFailTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, threeSteps)
	id := b.manual(t, "three", "k1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)

	old := `{"run_id": "` + id.String() + `", "step_key": "a", "generation": 1}`
	job, err := b.engine.Client().Insert(ctx, rawFirstStep{json.RawMessage(old)}, &river.InsertOpts{MaxAttempts: 1})
	require.NoError(t, err)
	var got *rivertype.JobRow
	require.Eventually(t, func() bool {
		got, err = b.engine.Client().JobGet(ctx, job.Job.ID)
		require.NoError(t, err)
		return got.FinalizedAt != nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "discarded", string(got.State))
	require.Len(t, got.Errors, 1)
	require.Contains(t, got.Errors[0].Error, `rflow.step.first args {"run_id"`)
	require.Contains(t, got.Errors[0].Error, `want [run id, "step/generation"]`)
	require.Len(t, b.recv.got("/a"), 1, "the malformed job made no call")
}

// TestRetryAttemptIsStepJob: a step's later attempt is a rflow.step job
// carrying its attempts, while first attempts before and after it keep the
// packed shape.
func TestRetryAttemptIsStepJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWith(t, retrying, jobs.Config{NoInline: true}) // as TestClaimEnqueuesFirstStepJob
	b.recv.mu.Lock()
	b.recv.status["/flaky"] = []int{503}
	b.recv.mu.Unlock()
	run := b.waitRun(t, b.manual(t, "flaky", "r1", nil))
	require.Equal(t, store.RunCompleted, run.Status)

	rows, err := b.pool.Query(ctx, `SELECT kind || ' ' || coalesce(args->>'step_key', split_part(args->>1, '/', 1)) || ' ' || coalesce(args->>'attempt', '-')
		FROM (`+jobsOfRun+`) j`, run.ID)
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
