package relayer

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// cancelGas is the gas of a 0-value self-transfer.
const cancelGas = 21_000

// monitor is one poll of a broadcast send. In order: find a receipt for any
// hash ever broadcast for it (then wait for confirmations and finish); else,
// if its nonce was used by a transaction rflow did not send, heal; else
// cancel at the deadline or on request, bump stuck fees, or re-send bytes
// the node did not take. Then snooze until the next poll.
func (r *Relayer) monitor(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx) error {
	nonce := uint64(*row.Nonce)

	bs, err := store.RelayerBroadcasts(ctx, r.cfg.Pool, row.TxID)
	if err != nil {
		return err
	}
	bc, rc, err := receipt(ctx, b, bs)
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	if rc != nil {
		return r.mined(ctx, job, row, *bc, rc, b)
	}
	used, err := b.NonceAt(ctx, w.Address(), nil)
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, fmt.Errorf("nonce: %w", err))
	}
	if used > nonce {
		// Look again: a hash of ours may have been mined between the two
		// lookups, and must never be taken for someone else's.
		if bc, rc, err = receipt(ctx, b, bs); err != nil {
			return r.later(ctx, row.TxID, job.ID, err)
		}
		if rc != nil {
			return r.mined(ctx, job, row, *bc, rc, b)
		}
	}
	if row.Status == store.RelayerMined {
		r.log.Warn("mined send lost its block (reorg); waiting for it again", "external_id", row.ExternalID)
		if err := store.SetRelayerTxMined(ctx, r.cfg.Pool, row.TxID, job.ID, nil); err != nil {
			return err
		}
	}

	cur := latestAt(bs, *row.Nonce)
	if used > nonce {
		return r.nonceTaken(ctx, job, w, b, row, cur)
	}
	if cur == nil {
		// No bytes recorded at this nonce (its broadcast was healed onto it
		// and crashed before signing): sign them now.
		signed, err := r.signRecord(ctx, w, row, "send", rowFees(row))
		if err != nil {
			return err
		}
		return r.sendAndSnooze(ctx, job, b, row, signed)
	}

	now := time.Now()
	if used < nonce && now.Sub(cur.CreatedAt) >= r.cfg.BumpAfter {
		filled, err := r.fillGap(ctx, w, b, row, used)
		if err != nil {
			return r.later(ctx, row.TxID, job.ID, err)
		}
		if filled {
			return river.JobSnooze(r.cfg.PollInterval)
		}
	}
	cancel := row.CancelRequestedAt != nil || (row.ExpiresAt != nil && now.After(*row.ExpiresAt))
	switch {
	case cancel && cur.Kind != "cancel":
		return r.replace(ctx, job, w, b, row, cur, "cancel")
	case untaken(bs, *row.Nonce):
		return r.resend(ctx, job, w, b, row, cur)
	case now.Sub(cur.CreatedAt) >= r.cfg.BumpAfter:
		return r.replace(ctx, job, w, b, row, cur, cur.Kind)
	case cur.SentAt == nil:
		signed, err := decodeRaw(cur.Raw)
		if err != nil {
			return err
		}
		return r.sendAndSnooze(ctx, job, b, row, signed)
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// receipt looks for a receipt of any broadcast, newest first.
func receipt(ctx context.Context, b Backend, bs []store.RelayerBroadcast) (*store.RelayerBroadcast, *types.Receipt, error) {
	for i := len(bs) - 1; i >= 0; i-- {
		rc, err := b.TransactionReceipt(ctx, common.HexToHash(bs[i].Hash))
		if errors.Is(err, ethereum.NotFound) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("receipt %s: %w", bs[i].Hash, err)
		}
		return &bs[i], rc, nil
	}
	return nil, nil, nil
}

// untaken reports whether the node never took anything of the send's at
// nonce: exactly one broadcast there (never bumped, never cancelled), never
// accepted. Re-sending the same bytes would be "already known" had the node
// got them.
func untaken(bs []store.RelayerBroadcast, nonce int64) bool {
	n := 0
	for _, b := range bs {
		if b.Nonce == nonce {
			if b.SentAt != nil || b.Kind != "send" {
				return false
			}
			n++
		}
	}
	return n == 1
}

// latestAt is the newest broadcast at nonce, or nil.
func latestAt(bs []store.RelayerBroadcast, nonce int64) *store.RelayerBroadcast {
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].Nonce == nonce {
			return &bs[i]
		}
	}
	return nil
}

// mined handles a receipt for broadcast bc: record it, and once it has the
// confirmations asked for, finish the send (confirmed, or failed when it
// reverted; expired or cancelled when the no-op won).
func (r *Relayer) mined(ctx context.Context, job *river.Job[SendArgs], row *store.RelayerTx, bc store.RelayerBroadcast, rc *types.Receipt, b Backend) error {
	rec := &store.RelayerReceipt{Hash: bc.Hash, Block: rc.BlockNumber.Int64(), BlockHash: rc.BlockHash.Hex(),
		Status: int16(rc.Status), GasUsed: int64(rc.GasUsed)}
	// A receipt is one confirmation; more need the head.
	if need := uint64(max(row.Confirmations, 1)); need > 1 {
		head, err := b.BlockNumber(ctx)
		if err != nil {
			return r.later(ctx, row.TxID, job.ID, fmt.Errorf("head: %w", err))
		}
		if head+1 < rc.BlockNumber.Uint64()+need {
			if row.Status != store.RelayerMined || row.Hash == nil || *row.Hash != bc.Hash ||
				row.MinedBlockHash == nil || *row.MinedBlockHash != rec.BlockHash {
				if err := store.SetRelayerTxMined(ctx, r.cfg.Pool, row.TxID, job.ID, rec); err != nil {
					return err
				}
			}
			return river.JobSnooze(r.cfg.PollInterval)
		}
	}
	f := store.RelayerFinal{Receipt: rec}
	switch {
	case bc.Kind == "cancel" && row.CancelRequestedAt != nil:
		f.Status = store.RelayerCancelled
	case bc.Kind == "cancel":
		f.Status, f.Error = store.RelayerExpired, "deadline passed; replaced by a no-op"
	case rc.Status == types.ReceiptStatusSuccessful:
		f.Status = store.RelayerConfirmed
	default:
		f.Status, f.Error = store.RelayerFailed, fmt.Sprintf("reverted on chain in block %d", rc.BlockNumber)
	}
	r.fault("relayer.before-final")
	return finish(ctx, r, job, row.TxID, f)
}

// nonceTaken handles a send whose nonce is used on chain while none of its
// own hashes has a receipt: a transaction rflow did not send took it. If the
// send had reached the mempool, someone replaced it on purpose and it ends
// replaced (re-sending could double-pay); otherwise it gets a new nonce and
// goes out again, unless cancelled or past its deadline.
func (r *Relayer) nonceTaken(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, cur *store.RelayerBroadcast) error {
	msg := fmt.Sprintf("nonce %d was used by a transaction rflow did not send", *row.Nonce)
	switch {
	case cur != nil && cur.SentAt != nil:
		return finish(ctx, r, job, row.TxID, store.RelayerFinal{Status: store.RelayerReplaced, Error: msg})
	case row.CancelRequestedAt != nil:
		return finish(ctx, r, job, row.TxID, store.RelayerFinal{Status: store.RelayerCancelled, Error: msg})
	case row.ExpiresAt != nil && time.Now().After(*row.ExpiresAt):
		return finish(ctx, r, job, row.TxID, store.RelayerFinal{Status: store.RelayerDropped, Error: msg})
	}
	return r.moveNonce(ctx, job, w, b, row, "its nonce was used by someone else")
}

// moveNonce gives a send the node never took a new nonce (never below the
// chain's pending nonce, which skips whatever someone else holds) and sends
// it there. Its bytes at the old nonce can never be mined once that nonce
// is someone else's, so this is still one transaction.
func (r *Relayer) moveNonce(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, why string) error {
	pending, err := b.PendingNonceAt(ctx, w.Address())
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, fmt.Errorf("pending nonce: %w", err))
	}
	f, err := r.market(ctx, uint64(row.ChainID), b, uint64(*row.GasLimit))
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	healed, err := r.assignNonce(ctx, job.ID, row.TxID, row.Nonce, pending, f.capped(row.FeeCap), row.FeeCap)
	if err != nil || healed == nil {
		return err
	}
	r.log.Warn("nonce healed: send moved to a new nonce", "external_id", row.ExternalID, "why", why,
		"old_nonce", *row.Nonce, "new_nonce", *healed.Nonce)
	signed, err := r.current(ctx, w, healed)
	if err != nil {
		return err
	}
	return r.sendAndSnooze(ctx, job, b, healed, signed)
}

// fillGap handles a send stuck above a hole in the wallet's nonces: nonce
// gap is the next the chain will take, yet nothing is pending there (another
// sender's transaction that held it was dropped) and no send of ours holds
// it. It sends a 0-value self-transfer at gap so the sends above can be
// mined, and reports whether it did. The filler belongs to no send; if it is
// lost, a later poll sends another.
func (r *Relayer) fillGap(ctx context.Context, w *Wallet, b Backend, row *store.RelayerTx, gap uint64) (bool, error) {
	pending, err := b.PendingNonceAt(ctx, w.Address())
	if err != nil {
		return false, fmt.Errorf("pending nonce: %w", err)
	}
	if pending != gap {
		return false, nil // something is pending at gap: not a hole
	}
	held, err := store.RelayerNonceInFlight(ctx, r.cfg.Pool, row.From, row.ChainID, int64(gap))
	if err != nil || held {
		return false, err
	}
	f, err := r.market(ctx, uint64(row.ChainID), b, cancelGas)
	if err != nil {
		return false, err
	}
	filler, err := w.sign(unsigned(uint64(row.ChainID), gap, w.Address(), new(big.Int), nil, f), uint64(row.ChainID))
	if err != nil {
		return false, err
	}
	class, _ := r.send(ctx, b, filler)
	r.log.Warn("filled a nonce gap with a no-op", "wallet", w, "chain_id", row.ChainID, "nonce", gap,
		"hash", filler.Hash(), "result", class.String())
	return class == sendOK || class == sendKnown, nil
}

// replace signs and sends a same-nonce replacement for cur with fees bumped
// by at least BumpPercent: a bumped copy of the send (kind "send") or a no-op
// (kind "cancel"). At the fee cap it re-sends cur's bytes instead, in case
// the node dropped them.
func (r *Relayer) replace(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, cur *store.RelayerBroadcast, kind string) error {
	now, err := r.market(ctx, uint64(row.ChainID), b, uint64(cur.Gas.GasLimit))
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	old := feesOf(cur.Gas)
	next, ok := bumped(old, now, r.cfg.BumpPercent, row.FeeCap)
	if kind == "cancel" {
		next.GasLimit = cancelGas
	}
	if !ok {
		r.log.Warn("send stuck at its fee cap; re-sending", "external_id", row.ExternalID, "fee_cap", row.FeeCap)
		signed, err := decodeRaw(cur.Raw)
		if err != nil {
			return err
		}
		return r.sendAndSnooze(ctx, job, b, row, signed)
	}
	if kind == "send" {
		if err := store.SetRelayerTxFees(ctx, r.cfg.Pool, row.TxID, job.ID, next.row()); err != nil {
			return err
		}
	}
	signed, err := r.signRecord(ctx, w, row, kind, next)
	if err != nil {
		return err
	}
	r.log.Info("replacing stuck broadcast", "external_id", row.ExternalID, "kind", kind, "nonce", *row.Nonce,
		"old_hash", cur.Hash, "new_hash", signed.Hash(), "price", next.price())
	return r.sendAndSnooze(ctx, job, b, row, signed)
}

// resend handles a send the node has never taken anything of at its nonce
// (see untaken): it sends cur's bytes again. A refusal for lack of funds
// (or another permanent refusal) proves the send never left the wallet: it
// fails at once. "Underpriced"
// means someone else's transaction holds the nonce in the mempool: rather
// than outbid it (it may be an operator's own), the send moves to a new
// nonce. Any other refusal is retried, with a fee bump once BumpAfter has
// passed (the node may want more than the base fee the send offers).
func (r *Relayer) resend(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, cur *store.RelayerBroadcast) error {
	signed, err := decodeRaw(cur.Raw)
	if err != nil {
		return err
	}
	class, sendErr := r.send(ctx, b, signed)
	switch {
	case class.permanent():
		return finish(ctx, r, job, row.TxID, r.refusal(ctx, b, row, signed, class, sendErr))
	case class == sendUnderpriced:
		return r.moveNonce(ctx, job, w, b, row, "another transaction holds its nonce in the mempool")
	case class == sendTransient && time.Since(cur.CreatedAt) >= r.cfg.BumpAfter:
		return r.replace(ctx, job, w, b, row, cur, "send")
	}
	if err := r.recordSend(ctx, r.cfg.Pool, row.TxID, job.ID, signed.Hash(), class, sendErr); err != nil {
		return err
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// sendAndSnooze sends signed bytes, records the outcome and waits for the
// next poll. Most refusals are handled by a later poll: nonce too low by the
// receipt and nonce checks, underpriced by the next bump, transient errors
// by re-sending. A permanent one (lack of funds, a rejection) is settled
// now, by refused.
func (r *Relayer) sendAndSnooze(ctx context.Context, job *river.Job[SendArgs], b Backend, row *store.RelayerTx, signed *types.Transaction) error {
	class, sendErr := r.send(ctx, b, signed)
	if class.permanent() {
		return r.refused(ctx, job, b, row, signed, class, sendErr)
	}
	if err := r.recordSend(ctx, r.cfg.Pool, row.TxID, job.ID, signed.Hash(), class, sendErr); err != nil {
		return err
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// refused settles bytes of the send the node refused for good. If the node
// still holds an earlier broadcast at the send's nonce (re-sending it is
// "already known"; typically a bump the wallet cannot pay for while the
// original waits), the refusal is only kept as the send's error and the
// original keeps its chance. If the node refuses every one of them too (it
// restarted, or the wallet was drained, and forgot them), nothing of the
// send is in its mempool and none can be paid for: the send ends now (see
// refusal) instead of re-broadcasting at every poll.
func (r *Relayer) refused(ctx context.Context, job *river.Job[SendArgs], b Backend, row *store.RelayerTx, signed *types.Transaction, class sendClass, sendErr error) error {
	bs, err := store.RelayerBroadcasts(ctx, r.cfg.Pool, row.TxID)
	if err != nil {
		return err
	}
	for i := len(bs) - 1; i >= 0; i-- {
		o := bs[i]
		if o.Nonce != *row.Nonce || o.SentAt == nil || o.Hash == signed.Hash().Hex() {
			continue
		}
		earlier, err := decodeRaw(o.Raw)
		if err != nil {
			return err
		}
		c, e := r.send(ctx, b, earlier)
		if c.permanent() {
			continue
		}
		// Held (or taken again), or an answer that proves nothing: keep
		// the refusal as the error; the next poll goes on from there.
		if c != sendOK && c != sendKnown {
			sendErr = fmt.Errorf("%w; re-sending %s: %v", sendErr, o.Hash, e)
		}
		if err := r.recordSend(ctx, r.cfg.Pool, row.TxID, job.ID, signed.Hash(), class, sendErr); err != nil {
			return err
		}
		return river.JobSnooze(r.cfg.PollInterval)
	}
	r.log.Warn("send refused for good and not in the node's mempool; ending it", "external_id", row.ExternalID,
		"nonce", *row.Nonce, "class", class.String(), "error", sendErr)
	return finish(ctx, r, job, row.TxID, r.refusal(ctx, b, row, signed, class, sendErr))
}
