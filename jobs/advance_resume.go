package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
)

// outcome is what a step attempt produced, or, for an operator's retry, the
// instruction to run the step again.
type outcome struct {
	output    any
	err       error
	retryable bool // the error is one the step's retry policy covers
	abandon   bool // another branch failed the run: cancel this step
	reopen    bool // `runs retry`: the step's row was reopened at a new attempt
	// keepOutput journals output with a failure too (a send's final
	// transaction); other failures journal only their error.
	keepOutput bool
	// parked: the executor committed the attempt's state itself (a send
	// handed to the relayer); there is nothing to settle.
	parked bool
	// jump continues the run at this top-level step instead of the next
	// one (a wait_for's on_timeout goto), in the settle's transaction.
	jump    string
	started time.Time
}

// stepAt is a journaled step and its place in the run.
type stepAt struct {
	l   loc
	row *store.StepRun
}

// findStep returns the journal row of key, or nil.
func findStep(journal []*store.StepRun, key string) *store.StepRun {
	for _, s := range journal {
		if s.Key == key {
			return s
		}
	}
	return nil
}

// locate finds a journaled step in its run's plan and returns an advance
// that continues the run from the journal, and the step's place.
func (e *Engine) locate(ctx context.Context, db store.DBTX, run *store.Run, journal []*store.StepRun, row *store.StepRun) (*advance, stepAt, error) {
	p, err := e.plan(ctx, db, run.Workflow, run.Generation)
	if err != nil {
		return nil, stepAt{}, err
	}
	at, err := p.stepAt(run, row)
	if err != nil {
		return nil, stepAt{}, err
	}
	a, err := e.newAdvance(p, run, journal)
	if err == nil && run.Journal == store.ReorgJournal {
		a.origin, err = e.loadOrigin(ctx, db, run.ID)
	}
	return a, at, err
}

// stepAt places a journal row in the plan.
func (p *plan) stepAt(run *store.Run, row *store.StepRun) (stepAt, error) {
	n := p.nodes[row.StepID]
	if n == nil {
		return stepAt{}, fmt.Errorf("run %s: step %s is not in generation %d of %s", run.ID, row.StepID, run.Generation, run.Workflow)
	}
	_, items, _, err := parseKey(row.Key)
	if err != nil {
		return stepAt{}, err
	}
	return stepAt{l: loc{n: n, items: items}, row: row}, nil
}

// resumeAt is the one way a run moves on from a journaled step: the step
// worker settling an attempt, the relayer finalising a send, and an
// operator's retry all come here. It settles outcome o of the steps at
// (one step; for a retry every step it reopened), each write fenced on the
// step's attempt, and advances the run from there in tx: the successor's
// row and job, or the run's end. It reports false when a fenced write found
// the run or step moved on; the caller must then roll tx back.
func (e *Engine) resumeAt(ctx context.Context, tx pgx.Tx, a *advance, o outcome, at ...stepAt) (bool, error) {
	w := &store.Writes{Journal: a.run.Journal}
	if a.status == store.RunQueued {
		a.status = store.RunRunning // its first outcome: the run is under way
	}
	started := &o.started
	if o.started.IsZero() {
		started = nil
	}
	for _, s := range at {
		l, step := s.l, s.row
		key, attempt := step.Key, step.Attempt
		switch {
		case o.reopen:
			if e.isEffect(l.n.step.Kind) {
				// A side effect: a job at the step's new attempt. The
				// row exists (reopened), so flush creates no job for
				// it: enqueue it here.
				a.position = key
				if _, err := e.client.InsertManyTx(ctx, tx, []river.InsertManyParams{e.stepJob(a.run, key, attempt, nil)}); err != nil {
					return false, fmt.Errorf("retry run %s: %w", a.run.ID, err)
				}
				continue
			}
			// A pure step (if, fail, foreach items) is re-evaluated
			// from scratch.
			delete(a.rows, key)
			if err := store.DeleteStep(ctx, tx, a.run.ID, key); err != nil {
				return false, err
			}
			if err := a.runFrom(ctx, tx, l); err != nil {
				return false, err
			}
		case o.abandon:
			return store.SettleJournalStep(ctx, tx, a.run.Journal, a.run.ID, key, attempt, store.StepOutcome{Status: store.StepCancelled,
				Error: ptr("abandoned: the run failed in another branch")})
		case o.err == nil:
			output := mustJSON(o.output)
			w.SettleStep(a.run.ID, key, attempt, store.StepOutcome{Status: store.StepCompleted,
				Output: output, StartedAt: started})
			step.Status, step.Output = store.StepCompleted, output
			a.rows[key] = step
			a.decoded[key] = o.output
			var next *loc
			var err error
			if o.jump != "" {
				next, err = a.jumpTo(ctx, tx, l, key, o.jump)
			} else {
				next, err = a.after(ctx, tx, l, o.output)
			}
			if err != nil {
				return false, err
			}
			if next != nil {
				if err := a.runFrom(ctx, tx, *next); err != nil {
					return false, err
				}
			}
		case o.retryable && l.n.step.Retry.CanRetry(attempt):
			// A known failure: the next attempt gets a new number and
			// its own job after the backoff. Journaled errors are shown by
			// the API and the CLI: no URL credentials, whatever the step.
			msg := redact.Text(o.err.Error())
			when := time.Now().Add(l.n.step.Retry.BackoffDelay(attempt))
			ok, err := store.SettleJournalStep(ctx, tx, a.run.Journal, a.run.ID, key, attempt, store.StepOutcome{Status: store.StepRetrying,
				Error: &msg, StartedAt: started, NextAttempt: true})
			if err != nil || !ok {
				return ok, err
			}
			if _, err := e.client.InsertManyTx(ctx, tx, []river.InsertManyParams{e.stepJob(a.run, key, attempt+1, &when)}); err != nil {
				return false, err
			}
			// The run's row is written by flush below: a send that failed
			// leaves waiting_tx for running while it backs off.
		default:
			msg := redact.Text(o.err.Error())
			so := store.StepOutcome{Status: store.StepFailed, Error: &msg, StartedAt: started}
			if o.keepOutput {
				so.Output = mustJSON(o.output)
			}
			w.SettleStep(a.run.ID, key, attempt, so)
			step.Status, step.Error = store.StepFailed, &msg
			a.rows[key] = step
			if err := a.failRun(ctx, tx, l, key, fmt.Sprintf("step %s: %s", key, msg)); err != nil {
				return false, err
			}
		}
	}
	return e.flush(ctx, tx, []*advance{a}, false, w)
}
