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
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// cancelGas is the gas of a 0-value self-transfer.
const cancelGas = 21_000

// monitor is one poll of a broadcast send. In order: find a receipt for any
// hash ever broadcast for it in a block of the canonical chain (then wait for
// confirmations and finish); else, if it was mined and its block left the
// chain, track it again (see orphaned); else, if its nonce was used by a
// transaction rflow did not send, heal; else cancel at the deadline or on
// request, bump stuck fees, or re-send bytes the node did not take. Then
// snooze until the next poll.
func (r *Relayer) monitor(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx) error {
	nonce := uint64(*row.Nonce)

	bs, err := store.RelayerBroadcasts(ctx, r.cfg.Pool, row.TxID)
	if err != nil {
		return err
	}
	// A send in the mempool asks the node for its receipts and nonce only
	// when a block came since it last asked: one head read, shared by every
	// send on the network, stands in for two calls per send and poll.
	head, headErr := r.chainHead(ctx, b, uint64(row.ChainID))
	used, same := uint64(0), false
	if headErr == nil && row.Status == store.RelayerInMempool {
		used, same = r.unchanged(row.TxID, head, len(bs))
	}
	if !same {
		l, u, err := r.look(ctx, w, b, row, bs)
		if err != nil {
			return r.later(ctx, row.TxID, job.ID, err)
		}
		if l != nil {
			r.forget(row.TxID)
			return r.mined(ctx, job, row, l)
		}
		if used = u; headErr == nil && used <= nonce {
			// head was read before the look; a read that starts after
			// the look ended and finds the same block proves the chain
			// did not move across it.
			r.looked(row.TxID, lastLook{head: head.hash, broadcasts: len(bs), used: used, at: time.Now()})
		}
	}
	if row.Status == store.RelayerMined {
		if used <= nonce {
			return r.orphaned(ctx, job, w, b, row, bs)
		}
		// The new chain holds someone else's transaction at the nonce:
		// journal the lost block before nonceTaken settles the send.
		if err := r.orphan(ctx, job, row, nil); err != nil {
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
		return r.sendAndSnooze(ctx, job, w, b, row, "send", signed)
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
	// The bump clock starts at the latest signing, or at the reorg that
	// sent the send's bytes out again.
	since := cur.CreatedAt
	if row.OrphanedAt != nil && row.OrphanedAt.After(since) {
		since = *row.OrphanedAt
	}
	cancel := row.CancelRequestedAt != nil || (row.ExpiresAt != nil && now.After(*row.ExpiresAt))
	switch {
	case cancel && cur.Kind != "cancel":
		return r.replace(ctx, job, w, b, row, cur, "cancel")
	case untaken(bs, *row.Nonce):
		return r.resend(ctx, job, w, b, row, cur)
	case now.Sub(since) >= r.cfg.BumpAfter:
		return r.replace(ctx, job, w, b, row, cur, cur.Kind)
	case used == nonce && r.stalled(ctx, w, b, row, cur, now):
		return r.unstall(ctx, job, w, b, row, cur, bs)
	case cur.SentAt == nil:
		signed, err := decodeRaw(cur.Raw)
		if err != nil {
			return err
		}
		return r.sendAndSnooze(ctx, job, w, b, row, cur.Kind, signed)
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// look finds a canonical receipt of any of the send's broadcasts, else
// the wallet's nonce used on chain.
func (r *Relayer) look(ctx context.Context, w *Wallet, b Backend, row *store.RelayerTx, bs []store.RelayerBroadcast) (*landing, uint64, error) {
	l, err := r.landed(ctx, b, row, bs)
	if err != nil || l != nil {
		return l, 0, err
	}
	used, err := b.NonceAt(ctx, w.Address(), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("nonce: %w", err)
	}
	if used > uint64(*row.Nonce) {
		// Look again: a hash of ours may have been mined between the two
		// lookups, and must never be taken for someone else's.
		if l, err = r.landed(ctx, b, row, bs); err != nil || l != nil {
			return l, used, err
		}
	}
	return nil, used, nil
}

// landing is a receipt of one of a send's broadcasts in a block of the
// canonical chain, and the head it was checked against.
type landing struct {
	bc   store.RelayerBroadcast
	rc   *types.Receipt
	head uint64
	// unrecorded: the node accepted bc in this run and that is not written
	// yet; the write that settles the send records it too.
	unrecorded bool
}

// receipt is l as the journal records it.
func (l *landing) receipt() store.RelayerReceipt {
	return store.RelayerReceipt{Hash: l.bc.Hash, Block: l.rc.BlockNumber.Int64(), BlockHash: l.rc.BlockHash.Hex(),
		Status: int16(l.rc.Status), GasUsed: int64(l.rc.GasUsed)}
}

// landed looks for a receipt of any broadcast, newest first, and keeps it
// only if its block is the canonical block at its height now: a node may
// still serve the receipt of a block a reorg orphaned, and confirmations
// counted on that block would count a chain that no longer exists. It
// returns nil when no broadcast has a canonical receipt.
func (r *Relayer) landed(ctx context.Context, b Backend, row *store.RelayerTx, bs []store.RelayerBroadcast) (*landing, error) {
	var head uint64
	for i := len(bs) - 1; i >= 0; i-- {
		rc, err := b.TransactionReceipt(ctx, common.HexToHash(bs[i].Hash))
		if errors.Is(err, ethereum.NotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("receipt %s: %w", bs[i].Hash, err)
		}
		if head == 0 && row.Confirmations > 1 {
			// Read before the canonical check, so the chain checked has
			// at least this many blocks. A receipt alone is one
			// confirmation: a send needing no more needs no head.
			if head, err = b.BlockNumber(ctx); err != nil {
				return nil, fmt.Errorf("head: %w", err)
			}
		}
		ok, err := canonical(ctx, b, rc.BlockNumber, rc.BlockHash)
		if err != nil {
			return nil, err
		}
		if !ok {
			r.log.Warn("receipt is in a block that is no longer canonical; not counted", "external_id", row.ExternalID,
				"hash", bs[i].Hash, "block", rc.BlockNumber, "block_hash", rc.BlockHash)
			continue
		}
		return &landing{bc: bs[i], rc: rc, head: head}, nil
	}
	return nil, nil
}

// canonical reports whether hash is the node's canonical block at number
// (a block beyond the head, after a reorg to a shorter chain, is not).
func canonical(ctx context.Context, b Backend, number *big.Int, hash common.Hash) (bool, error) {
	var got common.Hash
	var err error
	if bh, ok := b.(blockHasher); ok {
		got, err = bh.BlockHash(ctx, number)
	} else {
		var h *types.Header
		if h, err = b.HeaderByNumber(ctx, number); err == nil && h == nil {
			err = ethereum.NotFound
		}
		if h != nil {
			got = h.Hash()
		}
	}
	if errors.Is(err, ethereum.NotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("block %d: %w", number, err)
	}
	return got == hash, nil
}

// untaken reports whether the node never took anything of the send's at
// nonce: exactly one broadcast there (never bumped, never cancelled), never
// accepted. Re-sending the same bytes would be "already known" had the node
// got them.
func untaken(bs []store.RelayerBroadcast, nonce int64) bool {
	cur := latestAt(bs, nonce)
	return atNonce(bs, nonce) == 1 && cur.SentAt == nil && cur.Kind == "send"
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

// mined handles a canonical receipt: record it, and once it has the
// confirmations asked for on the canonical chain, finish the send
// (confirmed, or failed when it reverted; expired or cancelled when the
// no-op won). A send that was mined in another block (a reorg moved it)
// journals the block it lost first.
func (r *Relayer) mined(ctx context.Context, job *river.Job[SendArgs], row *store.RelayerTx, l *landing) error {
	bc, rec := l.bc, l.receipt()
	journaled := row.Status == store.RelayerMined && row.Hash != nil && *row.Hash == bc.Hash &&
		row.MinedBlockHash != nil && *row.MinedBlockHash == rec.BlockHash
	if row.Status == store.RelayerMined && !journaled {
		r.log.Warn("mined send moved to another block (reorg); counting confirmations there", "external_id", row.ExternalID,
			"old_block", deref(row.MinedBlock), "old_block_hash", deref(row.MinedBlockHash),
			"block", rec.Block, "block_hash", rec.BlockHash, "hash", rec.Hash)
		if err := r.orphan(ctx, job, row, &rec); err != nil {
			return err
		}
		journaled = true
	}
	if awaitsConfirmations(row, l) {
		if l.unrecorded {
			if err := store.MarkBroadcastSent(ctx, r.cfg.Pool, row.TxID, job.ID, bc.Hash); err != nil {
				return err
			}
		}
		if !journaled {
			if err := store.SetRelayerTxMined(ctx, r.cfg.Pool, row.TxID, job.ID, rec); err != nil {
				return err
			}
		}
		return river.JobSnooze(r.cfg.PollInterval)
	}
	r.fault("relayer.before-final")
	return finish(ctx, r, job, row, landedFinal(row, l))
}

// awaitsConfirmations reports whether the send landed in l needs more
// blocks on top of its own: a receipt is one confirmation.
func awaitsConfirmations(row *store.RelayerTx, l *landing) bool {
	need := uint64(max(row.Confirmations, 1))
	return need > 1 && l.head+1 < l.rc.BlockNumber.Uint64()+need
}

// landedFinal is the final move of a send landed in l with every
// confirmation it needs.
func landedFinal(row *store.RelayerTx, l *landing) store.RelayerFinal {
	bc, rc, rec := l.bc, l.rc, l.receipt()
	f := store.RelayerFinal{Receipt: &rec}
	if l.unrecorded {
		f.Sent = bc.Hash
	}
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
	return f
}

// orphan journals the receipt of a mined send whose block left the
// canonical chain (see store.OrphanRelayerReceipt) and updates row to match:
// next is its receipt on the new chain, nil when the reorg dropped it.
func (r *Relayer) orphan(ctx context.Context, job *river.Job[SendArgs], row *store.RelayerTx, next *store.RelayerReceipt) error {
	if _, err := store.OrphanRelayerReceipt(ctx, r.cfg.Pool, row.TxID, job.ID, next); err != nil {
		return err
	}
	now := time.Now()
	row.OrphanedAt = &now
	if next == nil {
		row.Status, row.MinedBlock, row.MinedBlockHash = store.RelayerInMempool, nil, nil
	}
	return nil
}

// orphaned tracks a mined send again whose block left the canonical chain
// and whose transaction is in no canonical block now (the reorg dropped it,
// and nothing else used its nonce). It re-sends the very bytes that were
// mined: the same nonce, tx_id and hash, so whatever happens it is still
// one transaction. Only when the node refuses them for their fees (the new
// chain's base fee is above their cap) is the send re-signed, at the same
// nonce and recorded before it is sent. The bytes go out before the lost
// block is journaled: a crash in between finds the send still mined and
// does this again, which re-sends the same hash ("already known").
func (r *Relayer) orphaned(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, bs []store.RelayerBroadcast) error {
	r.fault("relayer.orphaned")
	lost := latestAt(bs, *row.Nonce)
	for i := range bs {
		if row.Hash != nil && bs[i].Hash == *row.Hash {
			lost = &bs[i]
		}
	}
	signed, err := decodeRaw(lost.Raw)
	if err != nil {
		return err
	}
	class, sendErr := r.send(ctx, b, signed)
	r.fault("relayer.after-resend")
	r.log.Warn("mined send lost its block (reorg); sent its bytes again", "external_id", row.ExternalID,
		"block", deref(row.MinedBlock), "block_hash", deref(row.MinedBlockHash), "hash", lost.Hash,
		"nonce", *row.Nonce, "result", class.String())
	switch class {
	case sendNonceTooLow:
		// The nonce is used on chain after all (the node's receipts lag its
		// state, or someone else's transaction holds it): the next poll
		// finds a receipt of ours or settles the send, and journals
		// whichever block it is.
		return river.JobSnooze(r.cfg.PollInterval)
	case sendTransient:
		// No answer that says anything: the send stays mined, so the next
		// poll sends the same bytes again.
		return r.later(ctx, row.TxID, job.ID, fmt.Errorf("re-send %s after a reorg: %w", lost.Hash, sendErr))
	}
	if err := r.orphan(ctx, job, row, nil); err != nil {
		return err
	}
	switch {
	case class == sendFeeTooLow:
		return r.replace(ctx, job, w, b, row, latestAt(bs, *row.Nonce), "send")
	case class == sendTipTooLow:
		return r.meetMinimum(ctx, job, w, b, row, lost.Kind, signed, sendErr)
	case class.permanent():
		return r.refused(ctx, job, b, row, signed, class, sendErr)
	}
	// Accepted; or underpriced: a transaction holds the nonce in the
	// mempool, which the bump clock outbids in time.
	if err := r.recordSend(ctx, r.cfg.Pool, row.TxID, job.ID, signed.Hash(), class, sendErr); err != nil {
		return err
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// deref is *p for a log attribute, nil when p is.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
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
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerReplaced, Error: msg})
	case row.CancelRequestedAt != nil:
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerCancelled, Error: msg})
	case row.ExpiresAt != nil && time.Now().After(*row.ExpiresAt):
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerDropped, Error: msg})
	}
	return r.moveNonce(ctx, job, w, b, row, "its nonce was used by someone else")
}

// moveNonce gives a send the node never took a new nonce (never below the
// chain's pending nonce, which skips whatever someone else holds) and sends
// it there. Its bytes at the old nonce can never be mined once that nonce
// is someone else's, so this is still one transaction.
func (r *Relayer) moveNonce(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, why string) error {
	r.distrust(w.Address(), uint64(row.ChainID))
	pending, err := b.PendingNonceAt(ctx, w.Address())
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, fmt.Errorf("pending nonce: %w", err))
	}
	f, err := r.market(ctx, uint64(row.ChainID), b, uint64(*row.GasLimit))
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	healed, err := r.assignNonce(ctx, job.ID, row.TxID, row.Nonce, pending, f.capped(capsOf(w, row)), row.FeeCap)
	if err != nil || healed == nil {
		return err
	}
	r.log.Warn("nonce healed: send moved to a new nonce", "external_id", row.ExternalID, "why", why,
		"old_nonce", *row.Nonce, "new_nonce", *healed.Nonce)
	signed, err := r.current(ctx, w, healed)
	if err != nil {
		return err
	}
	return r.sendAndSnooze(ctx, job, w, b, healed, "send", signed)
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
	next, ok := bumped(old, now, r.cfg.BumpPercent, capsOf(w, row))
	if kind == "cancel" {
		next.GasLimit = cancelGas
	}
	if !ok {
		r.log.Warn("send stuck at its fee cap; re-sending", "external_id", row.ExternalID, "fee_cap", row.FeeCap)
		signed, err := decodeRaw(cur.Raw)
		if err != nil {
			return err
		}
		return r.sendAndSnooze(ctx, job, w, b, row, cur.Kind, signed)
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
	return r.sendAndSnooze(ctx, job, w, b, row, kind, signed)
}

// stallAfter is how long the wallet's next transaction may sit unmined,
// accepted, before the relayer asks whether the node still means to mine
// it (stalled): a few polls, at least stallAfterMin.
func (r *Relayer) stallAfter() time.Duration { return max(4*r.cfg.PollInterval, stallAfterMin) }

const stallAfterMin = 200 * time.Millisecond

// stalled reports whether cur, the broadcast at the wallet's next nonce on
// chain, was accepted stallAfter ago and the node's pending nonce does not
// count it: the node holds nothing it will mine next at that nonce. A node
// that dropped the bytes (evicted, restarted, or a provider's other node
// behind a load balancer) says so this way, and so does anvil when a
// transaction reached its pool while it was mining the one before: it
// files it as waiting for that one, which is already mined, and never
// mines it (foundry-rs/foundry#10122). Either would otherwise wait for
// BumpAfter. The question is asked at most once per stallAfter for the
// send (and shared by concurrent polls of the wallet), whatever the number
// of sends waiting behind.
func (r *Relayer) stalled(ctx context.Context, w *Wallet, b Backend, row *store.RelayerTx, cur *store.RelayerBroadcast, now time.Time) bool {
	if cur.SentAt == nil || now.Sub(*cur.SentAt) < r.stallAfter() {
		return false
	}
	r.mu.Lock()
	last, ok := r.stalls[row.TxID]
	due := !ok || now.Sub(last) >= r.stallAfter()
	if due {
		if len(r.stalls) >= maxLooks {
			clear(r.stalls)
		}
		r.stalls[row.TxID] = now
	}
	r.mu.Unlock()
	if !due {
		return false
	}
	pending, err := askShared(ctx, &r.asking, fmt.Sprintf("stall/%s/%d", w.Address().Hex(), row.ChainID), func() (uint64, error) {
		return b.PendingNonceAt(ctx, w.Address())
	})
	return err == nil && pending <= uint64(*row.Nonce)
}

// unstall handles a stalled send (see stalled): it sends cur's bytes again,
// which puts them back where the node dropped them. A node that mines each
// transaction on arrival (anvil, Hardhat: see minesOnArrival) and answers
// that it has them already holds them where it will not mine them; a
// replacement is a new transaction it files afresh, so the send is
// replaced now rather than at BumpAfter, once per nonce. Any other node is
// left to BumpAfter: a provider whose pending count lags its mempool would
// otherwise pay a bump for every send.
func (r *Relayer) unstall(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, cur *store.RelayerBroadcast, bs []store.RelayerBroadcast) error {
	signed, err := decodeRaw(cur.Raw)
	if err != nil {
		return err
	}
	// The node took these bytes once (the send is broadcast), so admit
	// has nothing to gate: sendAndSnooze without it.
	class, sendErr := r.send(ctx, b, signed)
	if class != sendKnown || atNonce(bs, *row.Nonce) > 1 || !r.minesOnArrival(ctx, b, uint64(row.ChainID)) {
		r.log.Info("wallet's next transaction not pending at the node; sent again", "external_id", row.ExternalID,
			"nonce", *row.Nonce, "hash", cur.Hash, "result", class.String())
		return r.afterSend(ctx, job, w, b, row, cur.Kind, signed, class, sendErr, false)
	}
	r.log.Info("node holds the wallet's next transaction but not as pending; replacing it", "external_id", row.ExternalID,
		"nonce", *row.Nonce, "hash", cur.Hash)
	return r.replace(ctx, job, w, b, row, cur, cur.Kind)
}

// minesOnArrival reports whether chain chainID's node mines every
// transaction as it arrives (anvil's and Hardhat's automine), asked once:
// anvil_getAutomine, then hardhat_getAutomine. A node that knows neither
// (every production node and provider), or a backend that takes no
// JSON-RPC batches, does not.
func (r *Relayer) minesOnArrival(ctx context.Context, b Backend, chainID uint64) bool {
	r.mu.Lock()
	auto, known := r.automine[chainID]
	r.mu.Unlock()
	if known {
		return auto
	}
	bc := r.batchOf(b, chainID)
	if bc == nil {
		return false
	}
	answered := false
	for _, method := range []string{"anvil_getAutomine", "hardhat_getAutomine"} {
		var on bool
		elems := []rpc.BatchElem{{Method: method, Result: &on}}
		err := bc.BatchCallContext(ctx, elems)
		if err == nil {
			err = elems[0].Error
		}
		if ctx.Err() != nil {
			return false // not answered: ask again next time
		}
		if err == nil {
			auto, answered = on, true
			break
		}
		var rpcErr rpc.Error
		answered = answered || errors.As(err, &rpcErr) // the node said no such method
	}
	if answered {
		r.mu.Lock()
		r.automine[chainID] = auto
		r.mu.Unlock()
	}
	return auto
}

// atNonce is how many broadcasts bs holds at nonce.
func atNonce(bs []store.RelayerBroadcast, nonce int64) int {
	n := 0
	for _, b := range bs {
		if b.Nonce == nonce {
			n++
		}
	}
	return n
}

// resend handles a send the node has never taken anything of at its nonce
// (see untaken): it sends cur's bytes again. A refusal for lack of funds
// (or another permanent refusal) proves the send never left the wallet: it
// fails at once. "Underpriced"
// means someone else's transaction holds the nonce in the mempool: rather
// than outbid it (it may be an operator's own), the send moves to a new
// nonce. A tip below the node's minimum is met at once (meetMinimum), and
// so is a fee cap below the base fee (a bump to the market's fees, within
// the caps). Any other refusal is retried, with a fee bump once BumpAfter
// has passed.
func (r *Relayer) resend(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, cur *store.RelayerBroadcast) error {
	signed, err := decodeRaw(cur.Raw)
	if err != nil {
		return err
	}
	reclaimed, stop, err := r.admit(ctx, job, row, "send")
	if stop {
		return err
	}
	class, sendErr := r.send(ctx, b, signed)
	if class.permanent() {
		return finish(ctx, r, job, row, r.refusal(ctx, b, row, signed, class, sendErr))
	}
	if err := r.recordAfter(ctx, job.ID, row, signed.Hash(), class, sendErr, reclaimed); err != nil {
		return err
	}
	switch {
	case class == sendUnderpriced:
		return r.moveNonce(ctx, job, w, b, row, "another transaction holds its nonce in the mempool")
	case class == sendTipTooLow:
		return r.meetMinimum(ctx, job, w, b, row, "send", signed, sendErr)
	case class == sendFeeTooLow || class == sendTransient && time.Since(cur.CreatedAt) >= r.cfg.BumpAfter:
		return r.replace(ctx, job, w, b, row, cur, "send")
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// sendAndSnooze sends signed bytes, records the outcome and waits for the
// next poll. Most refusals are handled by a later poll: nonce too low by the
// receipt and nonce checks, underpriced by the next bump, transient errors
// by re-sending. A permanent one (lack of funds, a rejection) is settled
// now, by refused; a tip below the node's minimum is met, by meetMinimum.
// signed is the send's (kind "send") or its no-op's ("cancel").
func (r *Relayer) sendAndSnooze(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, kind string,
	signed *types.Transaction) error {
	reclaimed, stop, err := r.admit(ctx, job, row, kind)
	if stop {
		return err
	}
	class, sendErr := r.send(ctx, b, signed)
	return r.afterSend(ctx, job, w, b, row, kind, signed, class, sendErr, reclaimed)
}

// afterSend is sendAndSnooze once the node has answered signed with class.
func (r *Relayer) afterSend(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, kind string,
	signed *types.Transaction, class sendClass, sendErr error, reclaimed bool) error {
	if class.permanent() {
		return r.refused(ctx, job, b, row, signed, class, sendErr)
	}
	if err := r.recordAfter(ctx, job.ID, row, signed.Hash(), class, sendErr, reclaimed); err != nil {
		return err
	}
	if class == sendTipTooLow {
		return r.meetMinimum(ctx, job, w, b, row, kind, signed, sendErr)
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
		if c.permanent() || c == sendTipTooLow {
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
	return finish(ctx, r, job, row, r.refusal(ctx, b, row, signed, class, sendErr))
}
