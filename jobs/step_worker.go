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

	"github.com/rflow-dev/rflow/redact"
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
// job, so the effect is never the first trace of the step.
func (w *stepWorker) Work(ctx context.Context, job *river.Job[StepArgs]) error {
	e, args := w.e, job.Args
	run, journal, err := store.RunWithSteps(ctx, e.pool, args.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if run.Generation != args.Generation || run.Attempt != args.RunAttempt || store.RunTerminal(run.Status) {
		e.stale("run moved on", args, run.Status)
		return nil
	}
	var step *store.StepRun
	for _, s := range journal {
		if s.Key == args.StepKey {
			step = s
		}
	}
	if step == nil {
		e.stale("step not journaled", args, run.Status)
		return nil
	}
	if step.Attempt != args.Attempt {
		e.stale("step attempt moved on", args, step.Status)
		return nil
	}
	switch step.Status {
	case store.StepQueued, store.StepRetrying, store.StepWaiting:
	default:
		// Completed (its successor was enqueued in the same commit),
		// failed, skipped or cancelled: nothing left to do.
		return nil
	}
	p, err := e.plan(ctx, e.pool, run.Workflow, run.Generation)
	if err != nil {
		return err
	}
	n := p.nodes[step.StepID]
	if n == nil {
		return fmt.Errorf("step %s is not in %s generation %d", step.StepID, run.Workflow, run.Generation)
	}
	_, items, _, err := parseKey(step.Key)
	if err != nil {
		return err
	}
	l := loc{n: n, items: items}
	a, err := e.newAdvance(p, run, journal)
	if err != nil {
		return err
	}
	if run.Error != nil && n.section == sectionSteps {
		// Another branch (a foreach item) failed the run: abandon this one.
		return e.settle(ctx, job, a, l, step, outcome{abandon: true})
	}

	started := time.Now()
	var out outcome
	switch n.step.Kind {
	case "delay":
		if step.WakeAt != nil && time.Until(*step.WakeAt) > 0 {
			return river.JobSnooze(time.Until(*step.WakeAt))
		}
		out.output = map[string]any{"woke_at": time.Now().UTC().Format(time.RFC3339Nano)}
	case "http_call", "notify":
		e.faults.hit(FaultAfterJournal)
		out = e.doHTTP(ctx, run, step, n.step, a.env(l))
		e.faults.hit(FaultAfterEffect)
	case "send":
		if e.relayer == nil {
			out.err = errors.New("send: the project declares no wallets")
			break
		}
		if step.Status == store.StepWaiting {
			return nil // already handed to the relayer; it resumes the run
		}
		req, err := e.sendRequest(n.step, a.env(l), externalID(run.ID, step.Key, step.Attempt))
		if err != nil {
			out.err = err
			break
		}
		e.faults.hit(FaultAfterJournal)
		return e.parkSend(ctx, job, a, step, req)
	default:
		out.err = fmt.Errorf("%s steps are not available in this version of rflow", n.step.Kind)
	}
	out.started = started
	if err := e.settle(ctx, job, a, l, step, out); err != nil {
		return err
	}
	if l.n.parent != nil {
		e.faults.hit(FaultMidForeach)
	}
	return nil
}

// outcome is what a step attempt produced.
type outcome struct {
	output    any
	err       error
	retryable bool // the error is one the step's retry policy covers
	abandon   bool
	started   time.Time
}

// settle commits an attempt's outcome in one transaction: the job's
// completion first (it locks the job row; anything but `completed` means
// the job was rescued and another worker owns it), then the step's outcome
// fenced on its attempt, then the successor's row and job or the run's end.
func (e *Engine) settle(ctx context.Context, job *river.Job[StepArgs], a *advance, l loc, step *store.StepRun, o outcome) error {
	return e.jobTx(ctx, job, "outcome fenced off", func(tx pgx.Tx) error {
		key, attempt := step.Key, step.Attempt
		w := &store.Writes{}
		if a.status == store.RunQueued {
			a.status = store.RunRunning // its first outcome: the run is under way
		}
		started := &o.started
		if o.started.IsZero() {
			started = nil
		}
		switch {
		case o.abandon:
			ok, err := store.SettleStep(ctx, tx, a.run.ID, key, attempt, store.StepOutcome{Status: store.StepCancelled,
				Error: ptr("abandoned: the run failed in another branch")})
			if err != nil || !ok {
				return orStale(err)
			}
			return nil
		case o.err == nil:
			output := mustJSON(o.output)
			w.SettleStep(a.run.ID, key, attempt, store.StepOutcome{Status: store.StepCompleted,
				Output: output, StartedAt: started})
			step.Status, step.Output = store.StepCompleted, output
			a.rows[key] = step
			a.decoded[key] = o.output
			next, err := a.after(ctx, tx, l, o.output)
			if err != nil {
				return err
			}
			if next != nil {
				if err := a.runFrom(ctx, tx, *next); err != nil {
					return err
				}
			}
		case o.retryable && l.n.step.Retry.CanRetry(attempt):
			// A known failure: the next attempt gets a new number and
			// its own job after the backoff. Journaled errors are shown by
			// the API and the CLI: no URL credentials, whatever the step.
			msg := redact.Text(o.err.Error())
			wait := l.n.step.Retry.BackoffDelay(attempt)
			at := time.Now().Add(wait)
			ok, err := store.SettleStep(ctx, tx, a.run.ID, key, attempt, store.StepOutcome{Status: store.StepRetrying,
				Error: &msg, StartedAt: started, NextAttempt: true})
			if err != nil || !ok {
				return orStale(err)
			}
			a.jobs = append(a.jobs, stepJob(a.run, key, attempt+1, &at))
			_, err = e.client.InsertManyTx(ctx, tx, a.jobs)
			return err
		default:
			msg := redact.Text(o.err.Error())
			w.SettleStep(a.run.ID, key, attempt, store.StepOutcome{Status: store.StepFailed,
				Error: &msg, StartedAt: started})
			step.Status, step.Error = store.StepFailed, &msg
			a.rows[key] = step
			if err := a.failRun(ctx, tx, l, key, fmt.Sprintf("step %s: %s", key, msg)); err != nil {
				return err
			}
		}
		ok, err := e.flush(ctx, tx, []*advance{a}, false, w)
		if err != nil || !ok {
			return orStale(err)
		}
		return nil
	})
}

// jobTx runs fn in a transaction that completes job first: JobCompleteTx
// locks the job row, and any state but completed means the job was rescued
// and another worker owns it. If fn (or that check) finds the run or step
// moved on (errStale), everything rolls back and the job is a counted
// no-op.
func (e *Engine) jobTx(ctx context.Context, job *river.Job[StepArgs], why string, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		done, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		if err != nil {
			return fmt.Errorf("complete job %d: %w", job.ID, err)
		}
		if done.State != rivertype.JobStateCompleted {
			return errStale
		}
		return fn(tx)
	})
	if errors.Is(err, errStale) {
		e.stale(why, job.Args, "")
		return nil
	}
	return err
}

func (e *Engine) stale(why string, args StepArgs, status string) {
	e.Stale.Add(1)
	e.logger.Debug("stale step job ignored", "why", why, "run", args.RunID, "step", args.StepKey,
		"attempt", args.Attempt, "status", status)
}

func ptr[T any](v T) *T { return &v }
