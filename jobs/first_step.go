package jobs

import (
	"context"
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
// It exists for cost: River keeps a GIN index on every job's args, and
// each key is an entry in it per job, written when the job is inserted and
// again when completing it rewrites the row. Two keys fewer made River's
// COPY of a claim batch's jobs about a quarter cheaper (see
// docs/BENCHMARKS.md, "The claim path alone"). It is a kind of its own,
// not StepArgs with omitted fields, so that a process of an older version
// never reads it as attempt 0 and drops it as stale: without a worker for
// the kind it fails the job, which River retries until a process that has
// one works it.
type FirstStepArgs struct {
	RunID      uuid.UUID `json:"run_id"` // `rflow runs prune` finds a run's jobs by it
	StepKey    string    `json:"step_key"`
	Generation int64     `json:"generation"`
}

// Kind is the River job kind.
func (FirstStepArgs) Kind() string { return "rflow.step.first" }

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
