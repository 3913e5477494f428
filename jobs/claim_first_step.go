package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// FirstStepArgs is the job of attempt 1 of a step of a run's first
// attempt: StepArgs without the two attempts, which are 1 by
// construction. Every such job has this shape, the one enqueued with the
// claim (hence the name) and each successor a step's outcome enqueues;
// retries, `runs retry` and on_reorg responses use StepArgs.
//
// It exists for cost: River keeps a GIN index on every job's args, an
// entry per key and per value of each job, written when the job is
// inserted and again when completing it rewrites the row. Its args are
// therefore the JSON array [run id, "step/generation"]: two entries where
// StepArgs has eight (see docs/BENCHMARKS.md, "The claim path alone").
// The run id is an element of its own so that `rflow runs prune` finds a
// run's jobs by the index (args ? run id). It is a kind of its own, not
// StepArgs with omitted fields, so that a process of an older version
// never reads it as attempt 0 and drops it as stale: without a worker for
// the kind it fails the job, which River retries until a process that has
// one works it.
type FirstStepArgs struct {
	RunID      uuid.UUID
	StepKey    string
	Generation int64
}

// Kind is the River job kind.
func (FirstStepArgs) Kind() string { return "rflow.step.first" }

// MarshalJSON packs the args as [run id, "step/generation"].
func (a FirstStepArgs) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]string{a.RunID.String(), a.StepKey + "/" + strconv.FormatInt(a.Generation, 10)})
}

// UnmarshalJSON reads what MarshalJSON writes and nothing else: a job
// whose args do not parse fails its attempt with the error (River records
// it on the job and retries), rather than running as some other step.
func (a *FirstStepArgs) UnmarshalJSON(b []byte) error {
	var v []string
	if err := json.Unmarshal(b, &v); err != nil || len(v) != 2 {
		return fmt.Errorf("rflow.step.first args %.100s: want [run id, \"step/generation\"]", b)
	}
	id, err := uuid.Parse(v[0])
	if err != nil {
		return fmt.Errorf("rflow.step.first args %.100s: run id: %w", b, err)
	}
	// Step keys hold no "/" today; the generation is after the last one
	// all the same.
	i := strings.LastIndexByte(v[1], '/')
	if i <= 0 {
		return fmt.Errorf("rflow.step.first args %.100s: want \"step/generation\" after the run id", b)
	}
	gen, err := strconv.ParseInt(v[1][i+1:], 10, 64)
	if err != nil || gen < 1 {
		return fmt.Errorf("rflow.step.first args %.100s: generation %q is not a positive integer", b, v[1][i+1:])
	}
	*a = FirstStepArgs{RunID: id, StepKey: v[1][:i], Generation: gen}
	return nil
}

// step is the job's StepArgs: the step worker's stale checks apply as
// they would to a StepArgs job made at the claim.
func (a FirstStepArgs) step() StepArgs {
	return StepArgs{RunID: a.RunID, StepKey: a.StepKey, Generation: a.Generation, RunAttempt: 1, Attempt: 1}
}

// jobArgs is the River args of a step job: FirstStepArgs for a first
// attempt (step and run) of a run's own journal, else a.
func (a StepArgs) jobArgs() river.JobArgs {
	if a.RunAttempt == 1 && a.Attempt == 1 && !a.Reorg {
		return FirstStepArgs{RunID: a.RunID, StepKey: a.StepKey, Generation: a.Generation}
	}
	return a
}

// stepKeyOf is the step key a step job's args carry.
func stepKeyOf(args river.JobArgs) string {
	switch a := args.(type) {
	case FirstStepArgs:
		return a.StepKey
	case StepArgs:
		return a.StepKey
	}
	return ""
}

// firstStepWorker works FirstStepArgs jobs as the step worker works the
// StepArgs they stand for: same job row, so completing, rescuing and
// snoozing it are River's as for any step job.
type firstStepWorker struct {
	river.WorkerDefaults[FirstStepArgs]
	step *stepWorker
}

func (w *firstStepWorker) Work(ctx context.Context, job *river.Job[FirstStepArgs]) error {
	return w.step.Work(ctx, asStepJob(job))
}

func (w *firstStepWorker) Timeout(job *river.Job[FirstStepArgs]) time.Duration {
	return w.step.Timeout(asStepJob(job))
}

func asStepJob(job *river.Job[FirstStepArgs]) *river.Job[StepArgs] {
	return &river.Job[StepArgs]{JobRow: job.JobRow, Args: job.Args.step()}
}
