package relayer

import (
	"context"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// maxBatch caps the sends of one wallet that share a first broadcast's
// statements and node calls.
const maxBatch = 32

// firstSend is one send on its way to its first broadcast, from the job
// that drives it. Concurrent first broadcasts of one wallet on one network
// go in batches: the job that finds no batch running leads one with every
// send waiting then (its own included), which reserves their nonces in one
// statement, records their signed bytes in one, sends them in nonce order
// in one JSON-RPC request, looks for their receipts together and finalises
// the ones mined in one transaction. A batch keeps every guarantee of a
// single send, each send's rows written in the same order: nonces
// persisted before anything is signed, bytes before they are sent, and the
// final move fenced on each send's own job. What a batch leaves undone
// (not assigned, refused, not mined yet, more confirmations to wait for)
// each job finishes on its own, as a single send would.
type firstSend struct {
	job     *river.Job[SendArgs]
	w       *Wallet
	b       Backend
	row     *store.RelayerTx
	fees    fees
	limit   *big.Int
	pending uint64
	asked   time.Time

	err      error              // the batch failed for this send; the job returns it
	assigned *store.RelayerTx   // the send with its nonce; nil: none given
	signed   *types.Transaction // its bytes, recorded
	class    sendClass
	sendErr  error
	landing  *landing // its receipt, if the node mined it at once
	settled  bool     // the batch wrote its outcome: final, or in the mempool (no landing)
}

// firstBroadcast takes s through its wallet's next batch (Relayer.batches),
// leading it if no batch is running, and then does what the batch left to
// s's job.
func (r *Relayer) firstBroadcast(ctx context.Context, s *firstSend) error {
	key := walletChain{s.w.Address(), uint64(s.row.ChainID)}
	r.batches.join(key, s, maxBatch, func(batch []*firstSend) { r.runBatch(ctx, batch) })
	return r.afterBatch(ctx, s)
}

// runBatch is a batch's shared work, in a single send's order.
func (r *Relayer) runBatch(ctx context.Context, batch []*firstSend) {
	fail := func(sends []*firstSend, err error) {
		for _, s := range sends {
			s.err = err
		}
	}
	asks := make([]store.NonceAsk, len(batch))
	var pending uint64
	for i, s := range batch {
		r.fault("relayer.before-nonce")
		asks[i] = store.NonceAsk{TxID: s.row.TxID, JobID: s.job.ID, Gas: s.fees.row(), FeeCap: s.limit}
		pending = max(pending, s.pending)
	}
	rows, err := store.AssignNonces(ctx, r.cfg.Pool, pending, asks)
	if err != nil {
		fail(batch, err)
		return
	}
	byTx := make(map[uuid.UUID]*firstSend, len(batch))
	for _, s := range batch {
		byTx[s.row.TxID] = s
	}
	sends := make([]*firstSend, 0, len(rows)) // in nonce order
	for _, row := range rows {
		s := byTx[row.TxID]
		s.assigned = row
		r.trusted(s.w.Address(), uint64(row.ChainID), s.asked)
		r.log.Debug("nonce assigned", "external_id", row.ExternalID, "nonce", *row.Nonce)
		r.fault("relayer.after-nonce")
		sends = append(sends, s)
	}
	if len(sends) == 0 {
		return
	}
	bcs := make([]store.RelayerBroadcast, len(sends))
	for i, s := range sends {
		// A nonce this fresh has no bytes recorded for it yet.
		if s.signed, bcs[i], err = sign(s.w, s.assigned, "send", rowFees(s.assigned)); err != nil {
			fail(sends, err)
			return
		}
	}
	if err := store.RecordBroadcasts(ctx, r.cfg.Pool, bcs); err != nil {
		fail(sends, err)
		return
	}
	txs := make([]*types.Transaction, len(sends))
	for i, s := range sends {
		r.fault("relayer.before-send")
		txs[i] = s.signed
	}
	errs := r.sendAll(ctx, sends[0].b, uint64(sends[0].row.ChainID), txs)
	var accepted []*firstSend
	for i, s := range sends {
		r.fault("relayer.after-send")
		s.class, s.sendErr = r.sendOutcome(s.signed, errs[i])
		if s.class == sendNonceTooLow || s.class == sendUnderpriced {
			r.distrust(s.w.Address(), uint64(s.assigned.ChainID))
		}
		if s.class == sendOK || s.class == sendKnown {
			accepted = append(accepted, s)
		}
	}
	r.landedNow(ctx, accepted)
	var unmined []store.BroadcastSent
	var finals []settle
	var settling []*firstSend
	for _, s := range accepted {
		if s.landing == nil {
			unmined = append(unmined, store.BroadcastSent{TxID: s.assigned.TxID, JobID: s.job.ID, Hash: s.signed.Hash().Hex()})
			continue
		}
		if awaitsConfirmations(s.assigned, s.landing) {
			continue
		}
		r.fault("relayer.before-final")
		finals = append(finals, settle{job: s.job, row: s.assigned, final: landedFinal(s.assigned, s.landing)})
		settling = append(settling, s)
	}
	if len(unmined) > 0 {
		// Accepted, not mined yet (a chain with real block times): in
		// the mempool, for each job's next poll.
		if err := store.MarkBroadcastsSent(ctx, r.cfg.Pool, unmined); err != nil {
			fail(accepted, err)
			return
		}
		for _, s := range accepted {
			if s.landing == nil {
				s.settled = true
			}
		}
	}
	if len(finals) == 0 {
		return
	}
	if err := finishAll(ctx, r, finals); err != nil {
		// Each job finalises its own send instead (a hook that failed
		// fails only its own job then).
		r.log.Info("finalising a batch of sends failed; finalising one by one", "sends", len(finals), "error", err)
		return
	}
	for _, s := range settling {
		s.settled = true
	}
}

// afterBatch finishes what s's batch left to s's job.
func (r *Relayer) afterBatch(ctx context.Context, s *firstSend) error {
	row := s.assigned
	switch {
	case s.err != nil:
		return s.err
	case row == nil:
		// Cancelled meanwhile (a cancel refuses the nonce), or no longer
		// this job's: the next look settles which.
		row, err := r.owned(ctx, s.row.TxID, s.job.ID)
		if err != nil || row == nil {
			return err
		}
		if row.CancelRequestedAt != nil && row.Nonce == nil {
			return finish(ctx, r, s.job, row, store.RelayerFinal{Status: store.RelayerCancelled, Error: "cancelled before broadcast"})
		}
		return river.JobSnooze(r.cfg.PollInterval)
	case s.settled && s.landing == nil:
		return river.JobSnooze(r.cfg.PollInterval) // in the mempool
	case s.settled:
		return nil
	case s.class.permanent():
		return finish(ctx, r, s.job, row, r.refusal(ctx, s.b, row, s.signed, s.class, s.sendErr))
	case s.landing != nil:
		return r.mined(ctx, s.job, row, s.landing)
	}
	// The batch's bytes are the send's first, at a fresh nonce: a clean
	// refusal of them proves nothing of the send is out there.
	if err := r.recordAfter(ctx, s.job.ID, row, s.signed.Hash(), s.class, s.sendErr, true); err != nil {
		return err
	}
	if s.class == sendTipTooLow {
		return r.meetMinimum(ctx, s.job, s.w, s.b, row, "send", s.signed, s.sendErr)
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// landedNowFor bounds how long a first broadcast waits for its receipt (at
// most the poll interval), and landedNowPause is the pause before the first
// look, doubled before each next one (looks 1, 3, 7 and 15 ms after the
// node's answer). A node that mines at once (a dev chain) has the receipts
// a millisecond or two after it accepts, and every millisecond here is one
// the wallet's next batch waits; on a chain with blocks seconds apart this
// costs four receipt calls per batch (three with a first pause of 3 ms).
const (
	landedNowFor   = 30 * time.Millisecond
	landedNowPause = time.Millisecond
)

// landedNow looks for the receipts of sends the node just accepted, in the
// batch that sent them: on a chain that mines at once (a dev chain,
// automine) they are there already, and the sends finish without a second
// run. Each send's broadcast just signed is its only one (its nonce was
// fresh), so this is the monitor's receipt check, canonical block
// included. A send with no receipt yet (or no answer) keeps a nil landing:
// its next poll looks again, as it would have.
func (r *Relayer) landedNow(ctx context.Context, sends []*firstSend) {
	deadline := time.Now().Add(min(r.cfg.PollInterval, landedNowFor))
	looks := make([]look, len(sends))
	for i, s := range sends {
		looks[i] = look{row: s.assigned, bc: store.RelayerBroadcast{Hash: s.signed.Hash().Hex(), TxID: s.assigned.TxID,
			Kind: "send", Nonce: *s.assigned.Nonce, Gas: rowFees(s.assigned).row()}}
	}
	sends = slices.Clone(sends)
	wait := time.NewTimer(landedNowPause)
	defer wait.Stop()
	for pause := landedNowPause; len(sends) > 0; {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		ls := r.landedAll(ctx, sends[0].b, uint64(sends[0].row.ChainID), looks)
		waiting, unseen := sends[:0], looks[:0]
		for i, s := range sends {
			if ls[i] == nil {
				waiting, unseen = append(waiting, s), append(unseen, looks[i])
				continue
			}
			ls[i].unrecorded = true
			s.landing = ls[i]
		}
		sends, looks = waiting, unseen
		if pause *= 2; time.Now().Add(pause).After(deadline) {
			return
		}
		wait.Reset(pause)
	}
}
