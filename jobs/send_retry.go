package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
)

// retrySend gives a failed send another attempt under the step's retry:
// policy, inside the relayer's transaction that finalised it, and reports
// whether it did. Only a known failure that cannot have moved value is
// retried: a send refused before it left the wallet (a revert in
// simulation, insufficient funds, a rejection by the node) or one mined and
// reverted. A send a node once accepted and then lost fails the run instead,
// since its bytes may still be mined. The next attempt is a new send, keyed
// by the new attempt number.
func (e *Engine) retrySend(ctx context.Context, tx pgx.Tx, a *advance, l loc, step *store.StepRun, t *relayer.Transaction) (bool, error) {
	mined := t.ReceiptStatus != nil
	if t.Status != relayer.StatusFailed || (t.Accepted && !mined) || !l.n.step.Retry.CanRetry(step.Attempt) {
		return false, nil
	}
	msg := redact.Text(fmt.Sprintf("send %s: %s", t.Status, t.Error))
	at := time.Now().Add(l.n.step.Retry.BackoffDelay(step.Attempt))
	ok, err := store.SettleStep(ctx, tx, a.run.ID, step.Key, step.Attempt, store.StepOutcome{Status: store.StepRetrying,
		Error: &msg, NextAttempt: true})
	if err != nil || !ok {
		return ok, err
	}
	if _, err := e.client.InsertManyTx(ctx, tx, append(a.jobs, stepJob(a.run, step.Key, step.Attempt+1, &at))); err != nil {
		return false, fmt.Errorf("retry send %s: %w", t.ExternalID, err)
	}
	a.jobs = nil
	a.status = store.RunRunning
	if _, err := e.flush(ctx, tx, []*advance{a}, false, nil); err != nil {
		return false, err
	}
	return true, nil
}
