package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rflow-dev/rflow/store"
)

// StepArgs is the River job that performs one attempt of one step. The run
// attempt, generation and step attempt it carries fence it: a job for a
// state that no longer holds is a counted no-op (stale-event rejection).
type StepArgs struct {
	RunID      uuid.UUID `json:"run_id"`
	StepKey    string    `json:"step_key"`
	Generation int64     `json:"generation"`
	RunAttempt int       `json:"run_attempt"`
	Attempt    int       `json:"attempt"`
	// Reorg marks a step of an on_reorg response: RunID is the response's
	// id and the step lives in its journal (store.ReorgJournal).
	Reorg bool `json:"reorg,omitempty"`
}

func (a StepArgs) journal() store.Journal {
	if a.Reorg {
		return store.ReorgJournal
	}
	return store.RunJournal
}

// Kind is the River job kind.
func (StepArgs) Kind() string { return "rflow.step" }

var errStale = errors.New("stale: the run or step moved on")

type stepWorker struct {
	river.WorkerDefaults[StepArgs]
	e *Engine
}

// Work performs the step's side effect and commits its outcome. The step's
// row and attempt were made durable in the transaction that enqueued this
// job, so the effect is never the first trace of the step. When the
// settle leaves a successor to this job (step_carry.go), Work goes on to
// it, until the run ends, parks or needs a job of its own.
func (w *stepWorker) Work(ctx context.Context, job *river.Job[StepArgs]) error {
	e := w.e
	run, journal, step, err := e.loadStep(ctx, job.Args, job.ID)
	if err != nil || step == nil {
		return err
	}
	c := e.newCarrier(ctx, job)
	if step.Key != job.Args.StepKey {
		// A rescued or retried carrier: its own step is settled, and it
		// goes on with the step it was carrying.
		job = carriedJob(job, step.Key)
	}
	for {
		next, err := e.workStep(ctx, c, job, run, journal, step)
		if err != nil || next == nil {
			return err
		}
		if !e.keepCarrying(ctx) {
			return e.handOver(ctx, next)
		}
		job, run, journal, step = next.job, next.run, next.journal, next.step
	}
}

// workStep performs one attempt of step, under the step's own timeout, and
// returns the successor it left to carrier c, if any.
func (e *Engine) workStep(ctx context.Context, c *carrier, job *river.Job[StepArgs], run *store.Run, journal []*store.StepRun, step *store.StepRun) (next *carriedStep, err error) {
	if run.OrphanedAt != nil && run.Journal == store.RunJournal {
		// The run's log left the canonical chain: it stops at this step
		// boundary until its reorg response is decided (reorg.go).
		if held, err := e.hold(ctx, job, step); held || err != nil {
			return nil, err
		}
	}
	a, at, err := e.locate(ctx, e.pool, run, journal, step)
	if err != nil {
		return nil, err
	}
	if c != nil {
		// Each step gets its own step's timeout, as its own job would:
		// River's deadline for a job that may carry is the carrier's
		// (stepWorker.Timeout), and covers each step it carries
		// (pickCarried).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.stepJobTimeout(at.l.n.step))
		defer cancel()
	}
	if run.Error != nil && at.l.n.section == sectionSteps {
		// Another branch (a foreach item) failed the run: abandon this one.
		return nil, e.settle(ctx, job, a, at, outcome{abandon: true})
	}

	ctx, endSpan := e.traceStep(ctx, run, step)
	defer func() { endSpan(err) }()
	started := time.Now()
	out, err := e.exec(ctx, &attempt{job: job, run: run, step: step, a: a, l: at.l})
	if err != nil || out.parked {
		return nil, err
	}
	out.started = started
	a.carry = c
	if err := e.settle(ctx, job, a, at, out); err != nil {
		if !e.isEffect(at.l.n.step.Kind) {
			return nil, err
		}
		out, err = e.settleFailed(ctx, job, out, err)
		if err != nil {
			return nil, err
		}
	}
	e.faults.Hit(FaultAfterOutcome) // River's completer has not completed the job yet
	e.observeOutcome(at.l.n.step.Kind, out, out.retryable && at.l.n.step.Retry.CanRetry(step.Attempt))
	if at.l.n.parent != nil {
		e.faults.Hit(FaultMidForeach)
	}
	return a.carried(), nil
}

// loadStep loads the run and journal of a step job and returns its step,
// or a nil step when the job is stale: the run is gone, moved on or over,
// or the step is at another attempt or already settled. A job whose own
// step is done but which carries another (carrier is its River id; 0 for
// none) returns that one.
func (e *Engine) loadStep(ctx context.Context, args StepArgs, carrier int64) (*store.Run, []*store.StepRun, *store.StepRun, error) {
	run, journal, err := store.LoadJournal(ctx, e.pool, args.journal(), args.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if run.Generation != args.Generation || run.Attempt != args.RunAttempt || run.Status.Terminal() {
		e.stale("run moved on", args, run.Status)
		return nil, nil, nil, nil
	}
	step := findStep(journal, args.StepKey)
	switch {
	case step == nil:
		e.stale("step not journaled", args, run.Status)
		return nil, nil, nil, nil
	case step.Attempt == args.Attempt && (step.Status == store.StepQueued || step.Status == store.StepRetrying || step.Status == store.StepWaiting):
		return run, journal, step, nil
	}
	if c := findCarried(journal, carrier); c != nil {
		return run, journal, c, nil
	}
	if step.Attempt != args.Attempt {
		e.stale("step attempt moved on", args, step.Status)
	}
	// Completed (its successor was enqueued in the same commit), failed,
	// skipped or cancelled: nothing left to do.
	return nil, nil, nil, nil
}

// settle commits an attempt's outcome in one transaction: the step's
// outcome fenced on its attempt, then the successor's row and job or the
// run's end.
//
// It leaves the job's completion to River's batched completer instead of
// completing it in the transaction (JobCompleteTx, which Postgres plans
// afresh on every call: about 1 ms of its CPU per step). Every outcome a
// settle writes ends the job's part: the step is completed, failed or
// cancelled, or went to a new attempt with a job of its own. So the fence
// on the step's attempt is the whole fence: a run of the job that raced this
// one, or comes after a crash before the completer wrote, finds the step
// moved on and does nothing. Outcomes that keep the step at its attempt (an
// approval gate, a wait's timeout) complete the job in their transaction
// (jobTx).
//
// A settle may leave the successor to the same job (a.carry, see
// step_carry.go); a.carried() tells once the settle has committed.
func (e *Engine) settle(ctx context.Context, job *river.Job[StepArgs], a *advance, at stepAt, o outcome) error {
	committed := false
	err := e.fencedTx(ctx, job.Args, "outcome fenced off", func(tx pgx.Tx) error {
		ok, err := e.resumeAt(ctx, tx, a, o, at)
		if err != nil || !ok {
			return orStale(err)
		}
		committed = true
		return nil
	})
	if err != nil || !committed {
		a.carrying = "" // rolled back: nothing was left to this job
	}
	return err
}

// jobTx runs fn in a transaction that completes job first: JobCompleteTx
// locks the job row, and any state but completed means the job was rescued
// and another worker owns it. If fn (or that check) finds the run or step
// moved on (errStale), everything rolls back and the job is a counted
// no-op.
func (e *Engine) jobTx(ctx context.Context, job *river.Job[StepArgs], why string, fn func(pgx.Tx) error) error {
	return e.fencedTx(ctx, job.Args, why, func(tx pgx.Tx) error {
		if err := completeStepJob(ctx, tx, job); err != nil {
			return err
		}
		return fn(tx)
	})
}

// completeStepJob completes job in tx (JobCompleteTx, which locks its row)
// and returns errStale when the job was rescued and another worker owns
// it. JobCompleteTx decodes the completed row's args into the job's args
// type, and a step job's StepArgs may stand for a rflow.step.first job
// (claim_first_step.go), whose args have another shape: the row is completed as
// an undecoded job, since only its state is read.
func completeStepJob(ctx context.Context, tx pgx.Tx, job *river.Job[StepArgs]) error {
	done, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, &river.Job[undecoded]{JobRow: job.JobRow})
	if err != nil {
		return fmt.Errorf("complete job %d: %w", job.ID, err)
	}
	if done.State != rivertype.JobStateCompleted {
		return errStale
	}
	return nil
}

// undecoded is River job args that are never decoded (completeStepJob).
type undecoded struct{}

func (undecoded) Kind() string                { return "" }
func (*undecoded) UnmarshalJSON([]byte) error { return nil }

// fencedTx runs fn in a transaction whose fenced writes are its only
// fence: if fn finds the run or step moved on (errStale), everything rolls
// back and the job is a counted no-op. Its BEGIN rides with the outcome
// batch that opens a settle (store.BeginBatchedFunc).
func (e *Engine) fencedTx(ctx context.Context, args StepArgs, why string, fn func(pgx.Tx) error) error {
	err := store.BeginBatchedFunc(ctx, e.pool, fn)
	if errors.Is(err, errStale) {
		e.stale(why, args, "")
		return nil
	}
	return err
}

func (e *Engine) stale(why string, args StepArgs, status any) {
	e.Stale.Add(1)
	e.logger.Debug("stale step job ignored", "why", why, "run", args.RunID, "step", args.StepKey,
		"attempt", args.Attempt, "status", status)
}

func ptr[T any](v T) *T { return &v }
