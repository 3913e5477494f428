package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// ClaimTx passes claims through the claim gate and, for each claim that
// created a run, journals and enqueues the run's first side-effecting step
// in the same transaction (pure steps before it are evaluated inline). A
// crash before commit loses nothing (the trigger claims again); after
// commit, the run and its first job exist together. It returns how many runs
// were created.
func (e *Engine) ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error) {
	births, planned := e.planBirths(ctx, tx, claims)
	won, err := store.ClaimRunsBorn(ctx, tx, claims, births)
	if err != nil {
		return 0, err
	}
	e.rememberClaimed(won)
	if len(won) < len(claims) {
		if err := e.reincluded(ctx, tx, claims, won); err != nil {
			return 0, err
		}
	}
	if len(won) == 0 {
		return 0, nil
	}
	runs := make([]*store.Run, 0, len(won))
	var born []*advance
	var failed []*store.Run
	var msgs []string
	for _, w := range won {
		e.observer.RunsClaimed(w.Workflow, string(claims[w.Index].TriggerKind), 1)
		c := claims[w.Index]
		run := &store.Run{ID: w.ID, Workflow: w.Workflow, Generation: w.Generation, Attempt: 1,
			TriggerKey: c.TriggerKey, TriggerKind: c.TriggerKind, Trigger: c.Trigger, Status: store.RunQueued}
		switch {
		case c.TriggerError != "": // fails at once, paused or not (trigger_failure.go)
			failed, msgs = append(failed, run), append(msgs, c.TriggerError)
		case w.Born:
			born = append(born, planned[w.Index])
		case !w.Paused:
			runs = append(runs, run)
		}
	}
	if runs, err = e.gate(ctx, tx, runs); err != nil {
		return 0, err
	}
	if err := e.startRuns(ctx, tx, runs, born); err != nil {
		return 0, err
	}
	if err := e.failTriggers(ctx, tx, failed, msgs); err != nil {
		return 0, err
	}
	return len(won), nil
}

// reincluded passes the event claims that found their key taken to
// store.ReincludeRuns: an orphaned log claimed again is back in the
// canonical chain, and its run is no longer an orphan (reorg.go).
func (e *Engine) reincluded(ctx context.Context, tx pgx.Tx, claims []store.Claim, won []store.ClaimedRun) error {
	taken := make([]bool, len(claims))
	for _, w := range won {
		taken[w.Index] = true
	}
	var lost []store.Claim
	for i, c := range claims {
		if !taken[i] && c.TriggerKind == trigger.Event && c.ChainID != 0 {
			lost = append(lost, c)
		}
	}
	back, err := store.ReincludeRuns(ctx, tx, lost)
	if err != nil {
		return err
	}
	if back.Pending > 0 {
		e.logger.Info("orphaned logs are back in the canonical chain", "runs", back.Pending)
	}
	for _, l := range back.Late {
		if err := e.lateReinclusion(ctx, tx, l); err != nil {
			return err
		}
	}
	return nil
}

// startRuns plans the beginning of fresh runs and writes it in tx, with
// that of the runs born parked (planned before the gate, claim_birth.go):
// their first steps' rows (one COPY) and jobs (one COPY).
func (e *Engine) startRuns(ctx context.Context, tx pgx.Tx, runs []*store.Run, born []*advance) error {
	advs := make([]*advance, 0, len(runs)+len(born))
	for _, a := range born {
		e.traceClaim(ctx, a)
		advs = append(advs, a)
	}
	for _, run := range runs {
		// Runs start only in the engine that owns their workflow; a run
		// already started may be moved on by any (a live wait feed, an
		// approval), its jobs still going to its own queue (stepJob).
		if !e.owns(run.Workflow) {
			return e.scopeError(run.Workflow)
		}
		p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
		if err != nil {
			return err
		}
		a, err := e.newAdvance(p, run, nil)
		if err != nil {
			return err
		}
		if err := a.startRun(ctx, tx); err != nil {
			return fmt.Errorf("start run %s: %w", run.ID, err)
		}
		e.traceClaim(ctx, a)
		advs = append(advs, a)
	}
	_, err := e.flush(ctx, tx, advs, true, nil)
	return err
}

// StartRunTx claims a manual or webhook trigger occurrence and enqueues its
// first step, in tx. When the key already has a run, created is false and
// runID is that run; for a manual claim whose input differs from that run's,
// the error is a *store.TriggerKeyConflict (a webhook occurrence is its key,
// whatever its body says).
func (e *Engine) StartRunTx(ctx context.Context, tx pgx.Tx, c store.Claim) (uuid.UUID, bool, error) {
	n, err := e.ClaimTx(ctx, tx, []store.Claim{c})
	if err != nil {
		return uuid.Nil, false, err
	}
	id, same, err := store.RunByKey(ctx, tx, c.Workflow, c.TriggerKey, c.Trigger)
	if errors.Is(err, store.ErrNotFound) && n == 0 {
		// The gate claims nothing for a retired workflow, nor for a key
		// whose run was pruned.
		if w, werr := store.GetWorkflow(ctx, tx, c.Workflow); werr == nil && w.RetiredAt != nil {
			return uuid.Nil, false, &store.RetiredError{Workflow: c.Workflow, At: *w.RetiredAt}
		}
		if pruned, terr := store.Tombstone(ctx, tx, c.Workflow, c.TriggerKey); terr != nil || pruned != nil {
			return uuid.Nil, false, cmp.Or[error](terr, pruned)
		}
	}
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("workflow %s: %w", c.Workflow, err)
	}
	if n == 0 && !same && c.TriggerKind == trigger.Manual {
		return uuid.Nil, false, &store.TriggerKeyConflict{Workflow: c.Workflow, Key: c.TriggerKey, RunID: id}
	}
	return id, n == 1, nil
}

// RetryRunTx re-fires a dead-lettered run from its failed step; completed
// steps are never re-run. Jobs left over from the failed attempt become
// stale no-ops because the run's attempt moved. A run whose on_reorg
// response failed has that response retried instead, from its failed step
// (the run's own trigger log is gone); the run is returned as it is.
func (e *Engine) RetryRunTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
	run, _, err := e.RetryTx(ctx, tx, id)
	return run, err
}

// RetryTx is RetryRunTx that also returns the failed on_reorg response it
// retried instead of the run (nil when it retried the run), for callers
// that say which it was.
func (e *Engine) RetryTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, *store.Response, error) {
	// The run first, then its response: the order a reorg decision takes.
	if _, err := store.GetRun(ctx, tx, id, true); err != nil {
		return nil, nil, err
	}
	resp, err := store.FailedResponse(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	if resp != nil {
		if err := e.reopen(ctx, tx, store.ReorgJournal, resp.ID); err != nil {
			return nil, nil, fmt.Errorf("retry reorg response %s of run %s: %w", resp.ID, id, err)
		}
		run, err := store.GetRun(ctx, tx, id, false)
		return run, resp, err
	}
	if run, handled, err := e.retryTrigger(ctx, tx, id); handled || err != nil {
		return run, nil, err
	}
	if err := e.reopen(ctx, tx, store.RunJournal, id); err != nil {
		return nil, nil, err
	}
	run, err := store.GetRun(ctx, tx, id, false)
	return run, nil, err
}

// reopen retries the failed run-like row id of journal j from its failed
// step (see store.ReopenJournal), in tx.
func (e *Engine) reopen(ctx context.Context, tx pgx.Tx, j store.Journal, id uuid.UUID) error {
	run, steps, err := store.ReopenJournal(ctx, tx, j, id)
	if err != nil {
		return err
	}
	return e.resumeReopened(ctx, tx, j, run, steps)
}

// resumeReopened enqueues the reopened steps of run (a retried run or
// response, or a stopped run whose log came back), in tx.
func (e *Engine) resumeReopened(ctx context.Context, tx pgx.Tx, j store.Journal, run *store.Run, steps []*store.StepRun) error {
	id := run.ID
	journal, err := store.JournalSteps(ctx, tx, j, id)
	if err != nil {
		return err
	}
	p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
	if err != nil {
		return err
	}
	a, err := e.newAdvance(p, run, journal)
	if err != nil {
		return err
	}
	if j == store.ReorgJournal {
		if a.origin, err = e.loadOrigin(ctx, tx, id); err != nil {
			return err
		}
	}
	at := make([]stepAt, len(steps))
	for i, step := range steps {
		if at[i], err = p.stepAt(run, step); err != nil {
			return err
		}
	}
	if ok, err := e.resumeAt(ctx, tx, a, outcome{reopen: true}, at...); err != nil || !ok {
		return fmt.Errorf("retry %s %s: %w", j, id, orStale(err))
	}
	return nil
}

// CancelRunTx cancels a run that has not finished, and the transactions of
// the sends it waits on (see CancelRun).
func (e *Engine) CancelRunTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
	return CancelRun(ctx, tx, id)
}

// ResumeWorkflowTx unpauses a workflow and starts the runs claimed while it
// was paused.
func (e *Engine) ResumeWorkflowTx(ctx context.Context, tx pgx.Tx, name string) (int, error) {
	if err := store.SetWorkflowPaused(ctx, tx, name, false); err != nil {
		return 0, err
	}
	runs, err := store.PausedRuns(ctx, tx, name)
	if err != nil {
		return 0, err
	}
	// Runs claimed during the pause pass the workflow's guards now, as
	// fresh claims do: a resume never starts more than they admit.
	if runs, err = e.gate(ctx, tx, runs); err != nil {
		return 0, err
	}
	if err := e.startRuns(ctx, tx, runs, nil); err != nil {
		return 0, err
	}
	return len(runs), nil
}

func orStale(err error) error {
	if err != nil {
		return err
	}
	return errStale
}
