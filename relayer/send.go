package relayer

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// jobTimeout bounds one run of a relayer job: a few RPC calls and a commit.
const jobTimeout = 30 * time.Second

// SendArgs is the job that drives one send from queued to final. Its first
// run broadcasts (simulate, reserve a nonce, sign, record, send); later runs
// monitor (receipts, confirmations, bumps, healing), snoozing between polls,
// so one job lives for the whole wait and a snooze uses no attempts.
type SendArgs struct {
	TxID uuid.UUID `json:"tx_id"`
	// Queued is the send as QueueTx recorded it (nil for the jobs Recover
	// starts), so the job's very first run can go to AssignNonce without
	// reading the send first; see broadcastQueued.
	Queued *queuedSend `json:"queued,omitempty"`
}

// queuedSend is what a send's first broadcast needs of its row, none of
// which changes before the send has a nonce. Sends with a deadline or dry
// runs carry none: their first run reads the row.
type queuedSend struct {
	ExternalID    string         `json:"external_id"`
	Wallet        string         `json:"wallet"`
	ChainID       int64          `json:"chain_id"`
	From          common.Address `json:"from"`
	To            common.Address `json:"to"`
	Value         string         `json:"value"`
	Data          []byte         `json:"data,omitempty"`
	GasLimit      *int64         `json:"gas_limit,omitempty"`
	FeeCap        string         `json:"fee_cap,omitempty"`
	Confirmations int            `json:"confirmations,omitempty"`
}

func queuedOf(n store.NewRelayerTx) *queuedSend {
	if n.DryRun || n.ExpiresAt != nil {
		return nil
	}
	q := &queuedSend{ExternalID: n.ExternalID, Wallet: n.Wallet, ChainID: n.ChainID, From: common.HexToAddress(n.From),
		To: common.HexToAddress(n.To), Value: "0", Data: n.Data, GasLimit: n.GasLimit, Confirmations: n.Confirmations}
	if n.Value != nil {
		q.Value = n.Value.String()
	}
	if n.FeeCap != nil {
		q.FeeCap = n.FeeCap.String()
	}
	return q
}

// row is the send as it stands before its first broadcast.
func (q *queuedSend) row(txID uuid.UUID, jobID int64) (*store.RelayerTx, bool) {
	value, ok := new(big.Int).SetString(q.Value, 10)
	if !ok {
		return nil, false
	}
	row := &store.RelayerTx{TxID: txID, ExternalID: q.ExternalID, Wallet: q.Wallet, ChainID: q.ChainID,
		From: q.From.Hex(), To: q.To.Hex(), Value: value, Data: q.Data, GasLimit: q.GasLimit,
		Status: store.RelayerPending, Confirmations: q.Confirmations, JobID: &jobID}
	if q.FeeCap != "" {
		if row.FeeCap, ok = new(big.Int).SetString(q.FeeCap, 10); !ok {
			return nil, false
		}
	}
	return row, true
}

// broadcastQueued is a send job's very first run (River has fetched it
// once; every retry, rescue or snooze fetches it again): it simulates the
// send from the job's arguments and goes straight to AssignNonce, which
// itself checks that the send is still this job's, has no nonce and is not
// cancelled. It reports false, having changed nothing, for anything but the
// plain way (a simulation that fails or cannot be had, an unknown wallet):
// the ordinary run then reads the send and settles it.
func (r *Relayer) broadcastQueued(ctx context.Context, job *river.Job[SendArgs], q *queuedSend) (bool, error) {
	row, ok := q.row(job.Args.TxID, job.ID)
	if !ok {
		return false, nil
	}
	w, b, err := r.resolveSend(row)
	if err != nil {
		return false, nil
	}
	sim, err := r.estimate(ctx, b, uint64(row.ChainID), callMsg(row))
	if err != nil || sim.Failed() {
		return false, nil
	}
	return true, r.assignSend(ctx, job, w, b, row, sim)
}

// Kind is the River job kind.
func (SendArgs) Kind() string { return "relayer_send" }

// AddWorkers registers the relayer's workers: the send job and the
// periodic recovery (see PeriodicJobs).
func (r *Relayer) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &sendWorker{r: r})
	river.AddWorker(w, &recoverWorker{r: r})
}

type sendWorker struct {
	river.WorkerDefaults[SendArgs]
	r *Relayer
}

func (w *sendWorker) Timeout(*river.Job[SendArgs]) time.Duration { return jobTimeout }

func (w *sendWorker) Work(ctx context.Context, job *river.Job[SendArgs]) error {
	return w.r.work(ctx, job)
}

// work moves a send one step: the broadcast while it has no nonce, else one
// monitor poll.
func (r *Relayer) work(ctx context.Context, job *river.Job[SendArgs]) error {
	if q := job.Args.Queued; q != nil && len(job.AttemptedBy) == 1 {
		if done, err := r.broadcastQueued(ctx, job, q); done {
			return err
		}
	}
	row, err := r.owned(ctx, job.Args.TxID, job.ID)
	if err != nil || row == nil {
		return err
	}
	w, b, err := r.resolveSend(row)
	if err != nil {
		if row.Nonce != nil {
			// A nonce is reserved (and the send may be in the mempool):
			// only this send may use it, so wait for a process that knows
			// the wallet and network. Said once per send, not per poll.
			if row.Error != nil && *row.Error == err.Error() {
				return river.JobSnooze(r.cfg.PollInterval)
			}
			return r.later(ctx, row.TxID, job.ID, err)
		}
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerFailed, Error: err.Error()})
	}
	if row.Nonce == nil {
		return r.broadcast(ctx, job, w, b, row)
	}
	return r.monitor(ctx, job, w, b, row)
}

// owned loads the send a job works on and notes the job looked at it. It
// returns nil when there is nothing for this job to do: the send is final or
// another job drives it (this one is a duplicate or was superseded by
// Recover).
func (r *Relayer) owned(ctx context.Context, txID uuid.UUID, jobID int64) (*store.RelayerTx, error) {
	return store.CheckRelayerTx(ctx, r.cfg.Pool, txID, jobID)
}

// broadcast takes a send without a nonce to its first broadcast: simulate
// (a revert or a refusal fails it, nothing sent), quote fees, reserve a
// nonce (persisted before signing), sign, record the bytes, send. Whatever
// the node answers, the next poll takes it from there.
func (r *Relayer) broadcast(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx) error {
	switch {
	case row.CancelRequestedAt != nil:
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerCancelled, Error: "cancelled before broadcast"})
	case row.ExpiresAt != nil && time.Now().After(*row.ExpiresAt):
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerExpired, Error: "deadline passed before broadcast"})
	}
	sim, err := r.estimate(ctx, b, uint64(row.ChainID), callMsg(row))
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	simJSON, err := json.Marshal(sim)
	if err != nil {
		return err
	}
	if row.DryRun {
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerSimulated, Error: sim.Reason(), Simulation: simJSON})
	}
	if sim.Failed() {
		r.log.Info("send fails simulation; nothing sent", "external_id", row.ExternalID, "reason", sim.Reason())
		return finish(ctx, r, job, row, store.RelayerFinal{Status: store.RelayerFailed, Error: sim.Reason(), Simulation: simJSON})
	}
	return r.assignSend(ctx, job, w, b, row, sim)
}

// assignSend takes a send that passed its simulation to its first
// broadcast: quote fees, reserve a nonce (persisted before signing), sign,
// record the bytes, send, and look for the receipt.
func (r *Relayer) assignSend(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, sim *Simulation) error {
	gasLimit := sim.GasEstimate + sim.GasEstimate/5
	if row.GasLimit != nil {
		gasLimit = uint64(*row.GasLimit)
	}
	f, err := r.market(ctx, uint64(row.ChainID), b, gasLimit)
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	limit := row.FeeCap
	if limit == nil {
		limit = new(big.Int).Mul(f.price(), big.NewInt(r.cfg.MaxFeeMultiple))
	}
	caps := walletCaps(w, limit)
	f = f.capped(caps)
	if short := r.shortOfMinimum(uint64(row.ChainID), f, caps); short != "" {
		// The node refused less lately, and the caps allow no more: fail
		// before a nonce is taken, so nothing waits behind it (the row of
		// a first run is the job's copy: read whether it was cancelled).
		if row, err = r.owned(ctx, row.TxID, job.ID); err != nil || row == nil {
			return err
		}
		final := store.RelayerFinal{Status: store.RelayerFailed, Error: short}
		if row.CancelRequestedAt != nil {
			final = store.RelayerFinal{Status: store.RelayerCancelled, Error: "cancelled before broadcast"}
		}
		return finish(ctx, r, job, row, final)
	}
	pending, asked, err := r.chainPending(ctx, b, w.Address(), uint64(row.ChainID))
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	return r.firstBroadcast(ctx, &firstSend{job: job, w: w, b: b, row: row, fees: f, limit: caps.fee,
		pending: pending, asked: asked})
}

func callMsg(row *store.RelayerTx) ethereum.CallMsg {
	to := common.HexToAddress(row.To)
	return ethereum.CallMsg{From: common.HexToAddress(row.From), To: &to, Value: row.Value, Data: row.Data}
}

// assignNonce gives the send a nonce (see store.AssignNonce) with the fees
// to sign with; replacing is its current nonce when someone else used it.
// It returns nil when the send is no longer this job's to drive.
func (r *Relayer) assignNonce(ctx context.Context, jobID int64, txID uuid.UUID, replacing *int64, pending uint64, f fees, limit *big.Int) (*store.RelayerTx, error) {
	row, err := store.AssignNonce(ctx, r.cfg.Pool, txID, jobID, replacing, pending, f.row(), limit)
	if err != nil || row == nil {
		return nil, err
	}
	r.log.Debug("nonce assigned", "external_id", row.ExternalID, "nonce", *row.Nonce)
	return row, nil
}

// rowFees are the fees the send is currently signed with.
func rowFees(row *store.RelayerTx) fees {
	return fees{GasLimit: uint64(*row.GasLimit), MaxFee: row.MaxFee, Tip: row.MaxPriorityFee, GasPrice: row.GasPrice}
}

// current returns the signed transaction to send for the send's nonce: the
// latest one recorded (after a crash, the very bytes that may already be out
// there), else a newly signed one, recorded before it is returned.
func (r *Relayer) current(ctx context.Context, w *Wallet, row *store.RelayerTx) (*types.Transaction, error) {
	bs, err := store.RelayerBroadcasts(ctx, r.cfg.Pool, row.TxID)
	if err != nil {
		return nil, err
	}
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].Nonce == *row.Nonce {
			return decodeRaw(bs[i].Raw)
		}
	}
	return r.signRecord(ctx, w, row, "send", rowFees(row))
}

// signRecord signs the send (kind "send") or a 0-value self-transfer at its
// nonce (kind "cancel") with fees f and records it before it can be sent.
func (r *Relayer) signRecord(ctx context.Context, w *Wallet, row *store.RelayerTx, kind string, f fees) (*types.Transaction, error) {
	signed, bc, err := sign(w, row, kind, f)
	if err != nil {
		return nil, err
	}
	if err := store.RecordBroadcast(ctx, r.cfg.Pool, bc); err != nil {
		return nil, err
	}
	return signed, nil
}

// sign is signRecord without the record: the signed transaction and the
// broadcast row to record before it is sent.
func sign(w *Wallet, row *store.RelayerTx, kind string, f fees) (*types.Transaction, store.RelayerBroadcast, error) {
	to, value, data := common.HexToAddress(row.To), row.Value, row.Data
	if kind == "cancel" {
		to, value, data = w.Address(), new(big.Int), nil
	}
	signed, err := w.sign(unsigned(uint64(row.ChainID), uint64(*row.Nonce), to, value, data, f), uint64(row.ChainID))
	if err != nil {
		return nil, store.RelayerBroadcast{}, fmt.Errorf("sign %s: %w", row.TxID, err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return nil, store.RelayerBroadcast{}, err
	}
	return signed, store.RelayerBroadcast{Hash: signed.Hash().Hex(), TxID: row.TxID, Kind: kind, Nonce: *row.Nonce,
		Gas: f.row(), Raw: raw}, nil
}

func decodeRaw(raw []byte) (*types.Transaction, error) {
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		return nil, fmt.Errorf("decode recorded transaction: %w", err)
	}
	return tx, nil
}

// send calls eth_sendRawTransaction and sorts the outcome.
func (r *Relayer) send(ctx context.Context, b Backend, signed *types.Transaction) (sendClass, error) {
	return r.sendOutcome(signed, b.SendTransaction(ctx, signed))
}

// sendOutcome sorts the node's answer err to eth_sendRawTransaction of signed.
func (r *Relayer) sendOutcome(signed *types.Transaction, err error) (sendClass, error) {
	class := classifySend(err)
	switch need := statedMinimum(err); {
	case class == sendFeeTooLow:
		// The base fee moved past what the quote said (a reorg onto a
		// chain that charges more, say): the next quote must be fresh.
		r.mu.Lock()
		delete(r.quotes, signed.ChainId().Uint64())
		r.mu.Unlock()
	case class == sendTipTooLow && need != nil:
		r.learnMinimum(signed.ChainId().Uint64(), need)
	}
	if err != nil {
		r.log.Info("broadcast refused", "hash", signed.Hash(), "nonce", signed.Nonce(), "class", class.String(), "error", err)
	}
	return class, err
}

// refusal ends a send whose bytes the node refused for good (lack of funds,
// a rejection; see sendClass.permanent) while nothing of it is in the
// node's mempool: it fails with the reason, or ends cancelled if a cancel
// was asked for. A send no node ever accepted never left the wallet, so it
// gives its nonce back (the next send reuses it). One a node once accepted
// and lost (a restarted node) keeps it: the gap filler then consumes the
// nonce with a no-op, so the lost bytes can never be mined later.
func (r *Relayer) refusal(ctx context.Context, b Backend, row *store.RelayerTx, signed *types.Transaction, class sendClass, err error) store.RelayerFinal {
	msg := "refused by the node: " + err.Error()
	switch class {
	case sendTipTooLow:
		msg = err.Error() // meetMinimum's reason, quoting the node
	case sendInsufficientFunds:
		has := ""
		if bal, berr := b.BalanceAt(ctx, common.HexToAddress(row.From), nil); berr == nil {
			has = " has " + bal.String() + " wei,"
		}
		msg = fmt.Sprintf("insufficient funds for gas * price + value: wallet %s%s needs %s wei (%d gas × %s wei + value %s); node: %v",
			row.From, has, signed.Cost(), signed.Gas(), signed.GasFeeCap(), signed.Value(), err)
	}
	f := store.RelayerFinal{Status: store.RelayerFailed, Error: msg, ReleaseNonce: row.BroadcastAt == nil}
	if row.BroadcastAt != nil {
		f.Error += "; an earlier broadcast was accepted and then lost by the node"
	}
	if row.CancelRequestedAt != nil {
		f.Status, f.Error = store.RelayerCancelled, "cancelled; nothing of it is in the node's mempool: "+f.Error
	}
	return f
}

// recordSend writes a send attempt's outcome: accepted moves the send to
// in_mempool; a refusal is kept as the send's error for the monitor to act on.
func (r *Relayer) recordSend(ctx context.Context, q store.DBTX, txID uuid.UUID, jobID int64, hash common.Hash, class sendClass, err error) error {
	if class == sendOK || class == sendKnown {
		return store.MarkBroadcastSent(ctx, q, txID, jobID, hash.Hex())
	}
	return store.SetRelayerTxError(ctx, q, txID, jobID, fmt.Sprintf("broadcast %s: %s: %v", hash.Hex(), class, err))
}

// later records a transient failure and retries the job after the poll
// interval (snoozing does not use up attempts).
func (r *Relayer) later(ctx context.Context, txID uuid.UUID, jobID int64, cause error) error {
	r.log.Warn("relayer step will be retried", "tx_id", txID, "error", cause)
	if err := store.SetRelayerTxError(ctx, r.cfg.Pool, txID, jobID, cause.Error()); err != nil {
		return err
	}
	return river.JobSnooze(r.cfg.PollInterval)
}

// finish moves the send row to a final status in one transaction, running
// the FinalHook inside it; see finishAll.
func finish(ctx context.Context, r *Relayer, job *river.Job[SendArgs], row *store.RelayerTx, f store.RelayerFinal) error {
	return finishAll(ctx, r, []settle{{job: job, row: row, final: f}})
}

// settle is one send's final move (see finishAll).
type settle struct {
	job   *river.Job[SendArgs]
	row   *store.RelayerTx
	final store.RelayerFinal
}

// byExternalID orders settles the way finishAll locks their owners.
func byExternalID(a, b settle) int { return cmp.Compare(a.row.ExternalID, b.row.ExternalID) }

// finishAll moves sends to their final statuses in one transaction, running
// the FinalHook of each inside it; River's completer then completes each
// job when its Work returns. A send's status is the fence: FinishRelayerTxs
// moves only an in-flight send its job drives, under its row lock, so the
// hook runs once however many runs of the job race; a run that comes after
// (a crash before the completer wrote, a rescue) finds the send final and
// does nothing. Not completing the jobs in this transaction (JobCompleteTx,
// as a step's outcome does) saves a statement Postgres plans afresh on
// every call. Locks go owners (LockOwner, in external id order, so two
// batches never wait on each other in a cycle), then sends.
func finishAll(ctx context.Context, r *Relayer, settles []settle) error {
	tx, err := r.cfg.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	settles = slices.SortedFunc(slices.Values(settles), byExternalID)
	fs := make([]store.RelayerFinish, len(settles))
	for i, s := range settles {
		if r.cfg.LockOwner != nil {
			if err := r.cfg.LockOwner(ctx, tx, s.row.ExternalID); err != nil {
				return fmt.Errorf("relayer lock owner of %s: %w", s.row.ExternalID, err)
			}
		}
		fs[i] = store.RelayerFinish{TxID: s.row.TxID, JobID: s.job.ID, Final: s.final}
	}
	rows, err := store.FinishRelayerTxs(ctx, tx, fs)
	if err != nil {
		return err
	}
	for _, row := range rows {
		t, err := fromRow(row)
		if err != nil {
			return err
		}
		if r.cfg.OnFinal != nil {
			if err := r.cfg.OnFinal(ctx, tx, t); err != nil {
				return fmt.Errorf("relayer final hook for %s: %w", row.ExternalID, err)
			}
		}
		r.log.Info("send final", "external_id", row.ExternalID, "tx_id", row.TxID, "status", row.Status, "hash", t.Hash)
	}
	return tx.Commit(ctx)
}
