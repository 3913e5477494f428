package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// A log can come back after its reorg response was decided: the node
// re-mined its transaction more than confirmations blocks past the fork
// (a transaction left in a mempool, sent again by its owner). It is the
// same occurrence (the same transaction, the same position in it), so it
// makes no second run. What happens to the first:
//
//   - it had finished before it was orphaned: nothing is to do; its effects
//     stand (the relayer got its sends mined again on the new chain);
//   - the decision stopped it: the same run runs again, at the same
//     attempt, from the steps the stop cancelled, each at its own attempt,
//     so an HTTP call carries the Idempotency-Key it had and a send the
//     external id it had (never a second payment, and the payment a held
//     send never made is made);
//   - unless the stop cut short what cannot simply run again: a send the
//     relayer had been handed (its transaction was replaced by a no-op, or
//     mined), a send awaiting approval, a wait_for. The run stays
//     cancelled, logged at warn; `runs show` says what each step did.
//
// Either way the on_reorg response that already ran is not undone: it
// records the re-inclusion (reincluded_at).

// lateReinclusion resumes a run whose log came back after its decision, in
// the claim's transaction tx.
func (e *Engine) lateReinclusion(ctx context.Context, tx pgx.Tx, l store.LateReinclusion) error {
	if !l.Stopped {
		e.logger.Info("orphaned log re-included after its reorg was decided; the run had finished and stays as it is",
			"run", l.RunID, "response", l.ResponseID)
		return nil
	}
	journal, err := store.RunSteps(ctx, tx, l.RunID)
	if err != nil {
		return err
	}
	run, err := store.GetRun(ctx, tx, l.RunID, false)
	if err != nil {
		return err
	}
	p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
	if err != nil {
		return err
	}
	for _, s := range journal {
		if s.Status != store.StepCancelled {
			continue
		}
		if why, err := e.cannotRerun(ctx, tx, p, run, s); err != nil || why != "" {
			if err == nil {
				e.logger.Warn("orphaned log re-included after its reorg was decided; the stopped run is not resumed",
					"run", l.RunID, "step", s.Key, "reason", why)
			}
			return err
		}
	}
	run, steps, err := store.ReopenStopped(ctx, tx, l.RunID)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		return nil
	}
	if err := e.resumeReopened(ctx, tx, store.RunJournal, run, steps); err != nil {
		return fmt.Errorf("resume run %s after its log came back: %w", l.RunID, err)
	}
	e.logger.Warn("orphaned log re-included after its reorg was decided; the stopped run goes on",
		"run", l.RunID, "response", l.ResponseID, "steps", len(steps))
	return nil
}

// cannotRerun says why a step the stop cancelled cannot run again at its
// attempt ("" when it can).
func (e *Engine) cannotRerun(ctx context.Context, tx pgx.Tx, p *plan, run *store.Run, s *store.StepRun) (string, error) {
	n := p.nodes[s.StepID]
	if n == nil {
		return "the step is not in the run's generation", nil
	}
	switch n.step.Kind {
	case workflow.StepWaitFor:
		return "a wait_for was cancelled", nil
	case workflow.StepSend:
		if n.step.Send.Approval != nil {
			return "a send awaiting approval was cancelled", nil
		}
		_, err := store.RelayerTxByExternalID(ctx, tx, externalID(run.ID, s.Key, s.Attempt))
		switch {
		case err == nil:
			return "the relayer had the send's transaction when the run was stopped", nil
		case !errors.Is(err, store.ErrRelayerTxNotFound):
			return "", err
		}
	}
	return "", nil
}
