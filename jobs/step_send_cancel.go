package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// CancelRun cancels a run, its pending approvals, the waits it is parked on
// and the transactions of the sends it is waiting on, in tx. The cancellation of a send is only recorded here (an operator
// command has no node connection); the relayer job of a running process
// carries it out: a send without a nonce is never signed, a broadcast one is
// replaced by a same-nonce no-op. Each such step's error, and the run's,
// says plainly whether value may still move; noteCancelledSend records the
// end of the story when the relayer finalises the send.
// It needs no engine: operator commands call it with the database only.
func CancelRun(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
	// Lock the run before reading its journal: a send finalised meanwhile
	// (onTxFinal locks the run too) is then either seen or not waiting.
	// Locks go run, then each send's row: the relayer's finaliser takes
	// them in that order too (lockSendOwner), or the two would deadlock.
	if _, err := store.GetRun(ctx, tx, id, true); err != nil {
		return nil, err
	}
	journal, err := store.RunSteps(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	run, err := store.CancelRun(ctx, tx, id)
	if err != nil {
		return run, err
	}
	// A pending approval can no longer be decided; an approved one whose
	// send was not handed over yet never will be (its job sees the run
	// cancelled).
	if _, err := store.CancelRunApprovals(ctx, tx, id, ""); err != nil {
		return nil, err
	}
	// A wait_for it is parked on ends with it: no event resumes it.
	if err := store.CancelWaits(ctx, tx, id); err != nil {
		return nil, err
	}
	noted := false
	for _, s := range journal {
		if s.Kind != workflow.StepSend || s.Status != store.StepWaiting {
			continue
		}
		ext := externalID(id, s.Key, s.Attempt)
		t, _, err := relayer.CancelTx(ctx, tx, ext)
		if err != nil && !errors.Is(err, relayer.ErrNotFound) {
			return nil, fmt.Errorf("cancel run %s: %w", id, err)
		}
		note := "cancel: tx not sent"
		var out []byte
		if t != nil {
			note = cancelNote(t)
			out = mustJSON(map[string]any{"tx_id": t.TxID.String(), "external_id": ext, "status": string(t.Status),
				"hash": t.Hash.Hex(), "cancel": note})
		}
		ok, err := store.NoteCancelledSend(ctx, tx, id, s.Key, s.Attempt, note, out)
		if err != nil {
			return nil, err
		}
		noted = noted || ok
	}
	if !noted {
		return run, nil
	}
	return store.GetRun(ctx, tx, id, false)
}

// cancelNote says what a cancel means for a send's transaction as it stands
// when the run is cancelled.
func cancelNote(t *relayer.Transaction) string {
	switch {
	case t.Final():
		return fmt.Sprintf("cancel: the tx had already ended %s", t.Status)
	case t.Status == relayer.StatusMined:
		return fmt.Sprintf("cancel: too late, the tx was mined in block %d (its value moved unless a reorg removes it)", t.BlockNumber)
	case t.Nonce == nil:
		return "cancel: tx not sent (it will never be signed)"
	}
	return fmt.Sprintf("cancel: tx broadcast at nonce %d; a no-op replacement at that nonce is being sent, "+
		"the original may still be mined and move value", *t.Nonce)
}

// noteCancelledSend records, in the relayer's transaction that finalises
// it, how the transaction of a send whose run was cancelled ended: the
// no-op (or nothing) won, or the original was mined after all.
func (e *Engine) noteCancelledSend(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string, attempt int, t *relayer.Transaction) error {
	var note string
	mined := t.ReceiptStatus != nil
	switch {
	case t.Status == relayer.StatusCancelled && !mined && !t.Accepted:
		note = "cancel: tx not sent; nothing moved"
	case t.Status == relayer.StatusCancelled && !mined:
		note = "cancel: the tx was dropped unmined; nothing moved: " + t.Error
	case t.Status == relayer.StatusCancelled:
		note = fmt.Sprintf("cancel: the no-op replacement was mined at nonce %d in block %d; the original's value did not move",
			*t.Nonce, t.BlockNumber)
	case t.Status == relayer.StatusConfirmed:
		note = fmt.Sprintf("cancel: too late, the original was mined in block %d; its value moved", t.BlockNumber)
	case mined:
		note = fmt.Sprintf("cancel: too late, the original was mined in block %d and ended %s: %s", t.BlockNumber, t.Status, t.Error)
	default:
		note = fmt.Sprintf("cancel: the tx ended %s without being mined; nothing moved: %s", t.Status, t.Error)
	}
	out := map[string]any{"tx_id": t.TxID.String(), "external_id": t.ExternalID, "status": string(t.Status),
		"hash": t.Hash.Hex(), "block": int64(t.BlockNumber), "cancel": note}
	_, err := store.NoteCancelledSend(ctx, tx, runID, key, attempt, note, mustJSON(out))
	return err
}
