package relayer

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// Withhold is what an Admit hook returns to keep a send's bytes from going
// out: the send ends failed with Reason and nothing is sent (the engine's
// budget no longer fits the send).
type Withhold struct{ Reason string }

func (w *Withhold) Error() string { return w.Reason }

// refusedClean reports whether the node's refusal of bytes it was just
// sent proves it neither holds them nor mined them: they pay less than it
// takes (a fee cap below the base fee, a tip below its minimum, too little
// to replace what holds the nonce) or it refuses them for good. Sent again
// after an attempt whose answer was lost, bytes a node holds are "already
// known", so these refusals hold whatever happened before. "Nonce too low"
// does not: the bytes themselves may be what used the nonce. Nor does
// anything transient.
func refusedClean(c sendClass) bool {
	return c == sendUnderpriced || c == sendFeeTooLow || c == sendTipTooLow || c.permanent()
}

// admit runs the owner's gate (Config.Admit) before bytes of kind go out
// for a send no node has taken. It reports whether the owner had let go of
// what it holds for the send, so that every earlier broadcast of it was
// refused cleanly; stop reports that the job must return err instead of
// sending (the send ended withheld, or is no longer the job's).
func (r *Relayer) admit(ctx context.Context, job *river.Job[SendArgs], row *store.RelayerTx, kind string) (reclaimed, stop bool, err error) {
	if r.cfg.Admit == nil || kind != "send" || row.BroadcastAt != nil {
		return false, false, nil
	}
	var withheld *Withhold
	err = r.inTx(ctx, row, job.ID, func(tx pgx.Tx) error {
		var err error
		reclaimed, err = r.cfg.Admit(ctx, tx, row.ExternalID)
		return err
	})
	switch {
	case errors.As(err, &withheld):
		// Withheld only what it had let go of: nothing of the send was
		// ever taken, so its nonce goes back.
		r.log.Info("send withheld by its owner; nothing sent", "external_id", row.ExternalID, "reason", withheld.Reason)
		return false, true, finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerFailed, Error: withheld.Reason, ReleaseNonce: true})
	case errors.Is(err, errNotOwned):
		return false, true, nil
	case err != nil:
		return false, true, fmt.Errorf("admit %s: %w", row.ExternalID, err)
	}
	return reclaimed, false, nil
}

// recordAfter writes the outcome of bytes the node was just sent (see
// recordSend). A clean refusal of bytes of a send every earlier broadcast
// of which was refused cleanly too (clean: the batch's fresh bytes, or
// admit's reclaimed) proves nothing of the send is in the node's pool or
// on chain: the owner lets go of what it holds (Config.OnRefused) in the
// same transaction, until admit takes it back before the next bytes go out.
func (r *Relayer) recordAfter(ctx context.Context, jobID int64, row *store.RelayerTx, hash common.Hash, class sendClass, sendErr error, clean bool) error {
	if !clean || !refusedClean(class) || r.cfg.OnRefused == nil {
		return r.recordSend(ctx, r.cfg.Pool, row.TxID, jobID, hash, class, sendErr)
	}
	err := r.inTx(ctx, row, jobID, func(tx pgx.Tx) error {
		if err := r.recordSend(ctx, tx, row.TxID, jobID, hash, class, sendErr); err != nil {
			return err
		}
		return r.cfg.OnRefused(ctx, tx, row.ExternalID)
	})
	if errors.Is(err, errNotOwned) {
		return nil
	}
	return err
}

// errNotOwned: the send is final or another job drives it.
var errNotOwned = errors.New("relayer: send not owned by this job")

// inTx runs fn in a transaction that first locks the send for job jobID
// (errNotOwned when it is final or not the job's), so what fn writes is
// fenced like every other write of the job.
func (r *Relayer) inTx(ctx context.Context, row *store.RelayerTx, jobID int64, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		owned, err := store.CheckRelayerTx(ctx, tx, row.TxID, jobID)
		if err != nil {
			return err
		}
		if owned == nil {
			return errNotOwned
		}
		return fn(tx)
	})
}
