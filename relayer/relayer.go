// Package relayer is rflow's embedded transaction relayer: it turns a send,
// keyed by the caller's idempotency key (external_id), into exactly one live
// on-chain transaction, and follows it to a final state.
//
// A send is a row in relayer.transactions, inserted with ON CONFLICT
// (external_id) DO NOTHING inside the caller's database transaction together
// with its River job (SendArgs). The job's first run simulates the send
// (eth_estimateGas; a revert fails it with the decoded reason and sends
// nothing), reserves a nonce under a row lock and persists it before
// signing, records the signed bytes, and sends them; concurrent first runs
// of one wallet do this together, in batches (see firstSend). Its later
// runs, one per poll, look for the receipt and confirmations, bump fees at
// the same nonce when the send is stuck (new hash, same tx_id), heal a
// nonce someone else used, and expire or cancel a send with a same-nonce
// no-op. Every step is
// safe to repeat after a crash: a reserved nonce always belongs to its send,
// and re-sending recorded bytes cannot make a second transaction.
//
//	workers := river.NewWorkers()
//	r, err := relayer.New(relayer.Config{Pool: pool, Wallets: wallets, Networks: networks, OnFinal: resume})
//	r.AddWorkers(workers)
//	// … in the engine's transaction:
//	t, created, err := r.QueueTx(ctx, tx, relayer.Request{ExternalID: key, Wallet: "ops", ChainID: 1, To: to, Value: v})
package relayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"golang.org/x/sync/singleflight"

	"github.com/rflow-dev/rflow/chain/rpcbatch"
	"github.com/rflow-dev/rflow/store"
)

// ErrNotFound is returned by Get when no send has the external id.
var ErrNotFound = errors.New("relayer: transaction not found")

// FinalHook is called inside the database transaction that moves a send to
// a final status (confirmed, failed, expired, cancelled, replaced, dropped,
// simulated), so a caller can resume whatever waits on it atomically with
// that move. Returning an error rolls the move back; the job retries.
type FinalHook func(ctx context.Context, tx pgx.Tx, t *Transaction) error

// Config configures a Relayer.
type Config struct {
	// Pool is the database holding schemas relayer and river.
	Pool *pgxpool.Pool
	// Logger; nil discards.
	Logger *slog.Logger
	// Wallets by name. Keys stay in memory only.
	Wallets map[string]*Wallet
	// Networks by chain id: the caller's node connections (see Backend).
	Networks map[uint64]Backend
	// OnFinal, when set, runs in the transaction that finalises a send.
	OnFinal FinalHook
	// LockOwner, when set, runs in that transaction before the send's row
	// is locked, to lock what owns the send (the engine: its run). A caller
	// that locks the owner and then the send in one transaction (a run's
	// cancel, through CancelTx) then takes its locks in the finaliser's
	// order; locking the send first and the owner in OnFinal deadlocks.
	LockOwner func(ctx context.Context, tx pgx.Tx, externalID string) error
	// OnRefused, when set, runs in the transaction that records a refusal
	// proving that nothing of the send is in the node's pool or on chain
	// while the send goes on (see refusedClean): what the owner holds for
	// it may be let go (the engine releases its budget reservation).
	OnRefused func(ctx context.Context, tx pgx.Tx, externalID string) error
	// Admit, when set, runs before bytes of a send no node has taken go
	// out, in a transaction fenced on the send's job: the owner takes back
	// what OnRefused let go and reports whether it had (then a clean
	// refusal of these bytes runs OnRefused again). An error that is a
	// *Withhold ends the send failed with its reason, nothing sent; any
	// other error retries the job.
	Admit func(ctx context.Context, tx pgx.Tx, externalID string) (reclaimed bool, err error)
	// Middleware wraps the inserts of the relayer's jobs (the engine's
	// trace propagation: a send's job carries its step's trace).
	Middleware []rivertype.Middleware
	// Fault, when set, is called at each fault point ("relayer.after-queue",
	// "relayer.before-nonce", "relayer.after-nonce", "relayer.before-send",
	// "relayer.after-send", "relayer.before-final", and
	// "relayer.before-resend-at-minimum", see meetMinimum): crash tests kill the
	// process there. Nil in production.
	Fault func(point string)

	// RiverSchema is River's schema (default "river").
	RiverSchema string
	// Queue is the River queue for relayer jobs (default river.QueueDefault);
	// the River client working them must have it configured.
	Queue string
	// PollInterval is how often a send in flight is checked (default 1s).
	PollInterval time.Duration
	// BumpAfter is how long a broadcast may sit unmined before its fees are
	// bumped (default 30s).
	BumpAfter time.Duration
	// BumpPercent is the fee increase per bump, at least 10 (default 12).
	BumpPercent int64
	// MaxFeeMultiple caps bumps when a Request gives no MaxFeePerGas: the
	// cap is this multiple of the first broadcast's max fee (default 10).
	MaxFeeMultiple int64
	// StaleAfter is how long a send in flight may go unchecked before
	// Recover gives it a new job (default 2m; longer than a job's timeout).
	StaleAfter time.Duration
	// Adopt, when set, says whether Recover may give the send with this
	// external id a job in Queue (nil: every send). Processes working
	// different queues (a rehearsal's, the live one) each take their own.
	Adopt func(ctx context.Context, tx pgx.Tx, externalID string) (bool, error)
	// Ours, when set, says whether the send with this external id is one
	// of this relayer's project's (nil: every send): Retrack re-drives only
	// those, since another project's wallet of the same name may hold
	// another key. Its own project's recovery re-drives the others.
	Ours func(ctx context.Context, tx pgx.Tx, externalID string) (bool, error)
}

// Relayer queues, broadcasts and monitors sends. It is safe for concurrent
// use; all of its state is in Postgres.
type Relayer struct {
	cfg    Config
	log    *slog.Logger
	river  *river.Client[pgx.Tx] // insert-only: jobs go in with the caller's tx
	fault  func(point string)
	queue  string
	schema string

	mu       sync.Mutex
	quotes   map[uint64]quote          // fee quotes by chain id, reused for marketTTL
	minimums map[uint64]learned        // minimum prices nodes stated, by chain id; see learnMinimum
	synced   map[walletChain]time.Time // see chainPending
	// batches gathers first broadcasts by wallet and network (see
	// firstSend), estimates eth_estimateGas calls by chain id (see
	// estimateGas).
	batches   leaders[walletChain, *firstSend]
	estimates leaders[uint64, *estimateCall]
	heads     map[uint64]headSeen     // by chain id; see chainHead
	looks     map[uuid.UUID]lastLook  // sends' last polls; see unchanged
	stalls    map[uuid.UUID]time.Time // when a send was last checked for a stall; see stalled
	automine  map[uint64]bool         // whether a chain's node mines each transaction on arrival; see minesOnArrival
	// batchSizes are the batch sizes each chain's node takes (see batchOf).
	batchSizes map[uint64]*rpcbatch.Size
	asking     singleflight.Group // shared questions: see chainPending, chainHead, market
}

// New builds a Relayer. Its River jobs are inserted through an insert-only
// client on cfg.Pool; register the workers on the working client with
// AddWorkers.
func New(cfg Config) (*Relayer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("relayer: Config.Pool is required")
	}
	r := &Relayer{cfg: cfg, log: cfg.Logger, fault: cfg.Fault, quotes: map[uint64]quote{}, minimums: map[uint64]learned{}, synced: map[walletChain]time.Time{},
		heads: map[uint64]headSeen{}, looks: map[uuid.UUID]lastLook{}, stalls: map[uuid.UUID]time.Time{}, automine: map[uint64]bool{}, batchSizes: map[uint64]*rpcbatch.Size{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.fault == nil {
		r.fault = func(string) {}
	}
	r.schema = cmpOr(cfg.RiverSchema, store.RiverSchema)
	r.queue = cmpOr(cfg.Queue, river.QueueDefault)
	if r.cfg.PollInterval <= 0 {
		r.cfg.PollInterval = time.Second
	}
	if r.cfg.BumpAfter <= 0 {
		r.cfg.BumpAfter = 30 * time.Second
	}
	if r.cfg.BumpPercent < 10 {
		r.cfg.BumpPercent = 12
	}
	if r.cfg.MaxFeeMultiple <= 0 {
		r.cfg.MaxFeeMultiple = 10
	}
	if r.cfg.StaleAfter <= 0 {
		r.cfg.StaleAfter = 2 * time.Minute
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{Schema: r.schema, Logger: r.log, Middleware: cfg.Middleware})
	if err != nil {
		return nil, fmt.Errorf("relayer: river client: %w", err)
	}
	r.river = client
	return r, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Request is one send. ExternalID is the caller's idempotency key: a second
// QueueTx with the same ExternalID returns the first send and changes
// nothing.
type Request struct {
	ExternalID string
	Wallet     string // a key of Config.Wallets
	ChainID    uint64 // a key of Config.Networks
	To         common.Address
	Value      *big.Int // wei; nil is zero
	Data       []byte
	// Confirmations the receipt must have before the send is final
	// (0 or 1: final once mined).
	Confirmations int
	// GasLimit overrides the estimate (plus 20%) when non-zero.
	GasLimit uint64
	// MaxFeePerGas caps the fee per gas (max fee for EIP-1559, gas price
	// for legacy), including every bump. Nil: Config.MaxFeeMultiple × the
	// first broadcast's fee.
	MaxFeePerGas *big.Int
	// Deadline, when set, expires a send not mined by then: a same-nonce
	// no-op replaces it and it ends expired.
	Deadline time.Time
	// DryRun simulates the send, records the simulation and ends it as
	// simulated without reserving a nonce or broadcasting.
	DryRun bool
}

// Status is a send's state.
type Status string

// Statuses. Pending, InMempool and Mined are in flight; the rest are final.
const (
	StatusPending   Status = store.RelayerPending   // queued; maybe a nonce, not yet accepted by the node
	StatusInMempool Status = store.RelayerInMempool // accepted by the node, not mined
	StatusMined     Status = store.RelayerMined     // mined, waiting for confirmations
	StatusConfirmed Status = store.RelayerConfirmed // mined successfully with enough confirmations
	StatusFailed    Status = store.RelayerFailed    // simulation reverted or refused, or reverted on chain
	StatusExpired   Status = store.RelayerExpired   // deadline passed; nothing of it was mined
	StatusCancelled Status = store.RelayerCancelled // cancelled; nothing of it was mined
	StatusReplaced  Status = store.RelayerReplaced  // its nonce was used by a transaction rflow did not send, after it reached the mempool
	StatusDropped   Status = store.RelayerDropped   // its nonce was used by someone else before it was broadcast, and its deadline had passed
	StatusSimulated Status = store.RelayerSimulated // dry run: simulated only
)

// Transaction is a send as the relayer sees it.
type Transaction struct {
	TxID       uuid.UUID
	ExternalID string
	Wallet     string
	ChainID    uint64
	From       common.Address
	To         common.Address
	Value      *big.Int
	Data       []byte
	Nonce      *uint64 // nil until reserved
	Status     Status
	// Hash is the mined hash once mined, else the latest broadcast.
	Hash          common.Hash
	BlockNumber   uint64 // 0 until mined
	BlockHash     common.Hash
	ReceiptStatus *uint64 // 1 success, 0 reverted; nil until mined
	GasUsed       uint64
	Error         string
	Confirmations int
	DryRun        bool
	// CancelRequested: Cancel was asked for; the send ends cancelled unless
	// the original is mined first.
	CancelRequested bool
	// Accepted: a node once accepted one of its broadcasts. A failed send
	// that was never accepted (and has no receipt) never left the wallet.
	Accepted bool
	// OrphanedAt is when a reorg last took the block the send was mined
	// in off the canonical chain (nil: never); see Orphans.
	OrphanedAt *time.Time
	Simulation *Simulation
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// Final reports whether the send reached a state it never leaves.
func (t *Transaction) Final() bool {
	switch t.Status {
	case StatusPending, StatusInMempool, StatusMined:
		return false
	}
	return true
}

func fromRow(row *store.RelayerTx) (*Transaction, error) {
	t := &Transaction{
		TxID: row.TxID, ExternalID: row.ExternalID, Wallet: row.Wallet, ChainID: uint64(row.ChainID),
		From: common.HexToAddress(row.From), To: common.HexToAddress(row.To), Value: row.Value, Data: row.Data,
		Status: Status(row.Status), Confirmations: row.Confirmations, DryRun: row.DryRun,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, FinishedAt: row.FinishedAt,
		CancelRequested: row.CancelRequestedAt != nil, Accepted: row.BroadcastAt != nil, OrphanedAt: row.OrphanedAt,
	}
	if row.Nonce != nil {
		n := uint64(*row.Nonce)
		t.Nonce = &n
	}
	if row.Hash != nil {
		t.Hash = common.HexToHash(*row.Hash)
	}
	if row.MinedBlock != nil {
		t.BlockNumber = uint64(*row.MinedBlock)
	}
	if row.MinedBlockHash != nil {
		t.BlockHash = common.HexToHash(*row.MinedBlockHash)
	}
	if row.ReceiptStatus != nil {
		s := uint64(*row.ReceiptStatus)
		t.ReceiptStatus = &s
	}
	if row.GasUsed != nil {
		t.GasUsed = uint64(*row.GasUsed)
	}
	if row.Error != nil {
		t.Error = *row.Error
	}
	if len(row.Simulation) > 0 {
		t.Simulation = &Simulation{}
		if err := json.Unmarshal(row.Simulation, t.Simulation); err != nil {
			return nil, fmt.Errorf("decode simulation of %s: %w", row.TxID, err)
		}
	}
	return t, nil
}

// QueueTx records req and enqueues its send job, both in tx, the
// caller's transaction: commit it to send, roll it back and nothing
// happened. A request whose ExternalID was queued before returns that send
// and created=false, and enqueues nothing; the earlier send's fields win.
func (r *Relayer) QueueTx(ctx context.Context, tx pgx.Tx, req Request) (*Transaction, bool, error) {
	if req.ExternalID == "" {
		return nil, false, errors.New("relayer: Request.ExternalID is required")
	}
	w, _, err := r.resolve(req.Wallet, req.ChainID)
	if err != nil {
		return nil, false, err
	}
	if req.Value != nil && req.Value.Sign() < 0 {
		return nil, false, fmt.Errorf("relayer: send %s: negative value", req.ExternalID)
	}
	if req.Confirmations < 0 {
		return nil, false, fmt.Errorf("relayer: send %s: negative confirmations", req.ExternalID)
	}
	n := store.NewRelayerTx{
		TxID: uuid.Must(uuid.NewV7()), ExternalID: req.ExternalID, Wallet: req.Wallet, ChainID: int64(req.ChainID),
		From: w.Address().Hex(), To: req.To.Hex(), Value: req.Value, Data: req.Data, FeeCap: req.MaxFeePerGas,
		Confirmations: req.Confirmations, DryRun: req.DryRun,
	}
	if req.GasLimit > 0 {
		g := int64(req.GasLimit)
		n.GasLimit = &g
	}
	if !req.Deadline.IsZero() {
		n.ExpiresAt = &req.Deadline
	}
	// The job goes in first so the row is inserted with its driver (one
	// statement fewer per send); a duplicate takes its job out again.
	job, err := r.river.InsertTx(ctx, tx, SendArgs{TxID: n.TxID, Queued: queuedOf(n)}, r.insertOpts())
	if err != nil {
		return nil, false, fmt.Errorf("relayer: enqueue send job for %s: %w", req.ExternalID, err)
	}
	n.JobID = job.Job.ID
	row, created, err := store.QueueRelayerTx(ctx, tx, n)
	if err != nil {
		return nil, false, err
	}
	if !created {
		if _, err := r.river.JobDeleteTx(ctx, tx, job.Job.ID); err != nil {
			return nil, false, fmt.Errorf("relayer: drop the job of duplicate send %s: %w", req.ExternalID, err)
		}
	} else {
		r.fault("relayer.after-queue")
	}
	t, err := fromRow(row)
	return t, created, err
}

// startJob inserts a send job in tx and makes it the send's driver.
func (r *Relayer) startJob(ctx context.Context, tx pgx.Tx, txID uuid.UUID) error {
	res, err := r.river.InsertTx(ctx, tx, SendArgs{TxID: txID}, r.insertOpts())
	if err != nil {
		return fmt.Errorf("relayer: enqueue send job for %s: %w", txID, err)
	}
	return store.SetRelayerTxJob(ctx, tx, txID, res.Job.ID)
}

// insertOpts are the options of every relayer job. Snoozes, which is how
// the jobs wait, use no attempts; attempts count real errors (database
// errors, a failing FinalHook), retried with River's backoff.
func (r *Relayer) insertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: r.queue, MaxAttempts: 25}
}

// Get returns the send queued under externalID, or ErrNotFound.
func (r *Relayer) Get(ctx context.Context, externalID string) (*Transaction, error) {
	row, err := store.RelayerTxByExternalID(ctx, r.cfg.Pool, externalID)
	if errors.Is(err, store.ErrRelayerTxNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("relayer: get %s: %w", externalID, err)
	}
	return fromRow(row)
}

// GetByTxID returns the send with the stable id txID, or ErrNotFound.
func (r *Relayer) GetByTxID(ctx context.Context, txID uuid.UUID) (*Transaction, error) {
	row, err := store.RelayerTxByID(ctx, r.cfg.Pool, txID)
	if errors.Is(err, store.ErrRelayerTxNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("relayer: get %s: %w", txID, err)
	}
	return fromRow(row)
}

// Cancel asks for an in-flight send to be cancelled: a send not yet
// broadcast ends cancelled at once (by its job); one in the mempool is
// replaced by a same-nonce no-op and ends cancelled if the no-op is mined
// (if the original wins the race it ends confirmed). It reports false when
// the send is unknown or already past cancelling.
func (r *Relayer) Cancel(ctx context.Context, externalID string) (bool, error) {
	_, marked, err := CancelTx(ctx, r.cfg.Pool, externalID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return marked, err
}

// CancelTx is Cancel in the caller's transaction q, for a caller that has no
// Relayer (an operator command connected to no node): the request is only
// recorded, and the relayer job of a running process carries it out. It
// returns the send as it stands and whether it was marked; a send without
// a nonce at that moment is then never signed (see StatusCancelled).
func CancelTx(ctx context.Context, q store.DBTX, externalID string) (*Transaction, bool, error) {
	row, marked, err := store.RequestRelayerTxCancel(ctx, q, externalID)
	if errors.Is(err, store.ErrRelayerTxNotFound) {
		return nil, false, ErrNotFound
	}
	if err != nil {
		return nil, false, err
	}
	t, err := fromRow(row)
	return t, marked, err
}

// Broadcast is one signed transaction sent for a send.
type Broadcast struct {
	Hash  common.Hash
	Kind  string // "send", or "cancel" for a no-op replacing it
	Nonce uint64
	// MaxFee and MaxPriorityFee for EIP-1559, GasPrice for legacy.
	MaxFee, MaxPriorityFee, GasPrice *big.Int
	CreatedAt                        time.Time
	// Sent says whether the node accepted it.
	Sent bool
}

// Broadcasts lists every hash ever broadcast for a send, oldest first.
func (r *Relayer) Broadcasts(ctx context.Context, txID uuid.UUID) ([]Broadcast, error) {
	rows, err := store.RelayerBroadcasts(ctx, r.cfg.Pool, txID)
	if err != nil {
		return nil, err
	}
	out := make([]Broadcast, len(rows))
	for i, b := range rows {
		out[i] = Broadcast{Hash: common.HexToHash(b.Hash), Kind: b.Kind, Nonce: uint64(b.Nonce),
			MaxFee: b.Gas.MaxFee, MaxPriorityFee: b.Gas.MaxPriorityFee, GasPrice: b.Gas.GasPrice,
			CreatedAt: b.CreatedAt, Sent: b.SentAt != nil}
	}
	return out, nil
}

// Orphan is a block a send was mined in until a reorg took it off the
// canonical chain.
type Orphan struct {
	Hash        common.Hash // the send's transaction in that block
	BlockNumber uint64
	BlockHash   common.Hash
	DetectedAt  time.Time
}

// Orphans lists the blocks a send lost to reorgs, oldest first; its
// Transaction holds the block it is in now.
func (r *Relayer) Orphans(ctx context.Context, txID uuid.UUID) ([]Orphan, error) {
	rows, err := store.RelayerOrphanedReceipts(ctx, r.cfg.Pool, txID)
	if err != nil {
		return nil, err
	}
	out := make([]Orphan, len(rows))
	for i, o := range rows {
		out[i] = Orphan{Hash: common.HexToHash(o.Hash), BlockNumber: uint64(o.Block), BlockHash: common.HexToHash(o.BlockHash),
			DetectedAt: o.DetectedAt}
	}
	return out, nil
}

// resolveSend is resolve for a recorded send, which must still be sent from
// the address it was queued (and its nonce reserved) from: when the key
// behind its wallet name changed (a new key configured, or rflow dev's
// wallet made fresh for each session), signing with the new key would send
// it from another account, at a nonce reserved on the old one, while the
// old account's bytes may still be mined: two transactions for one send.
func (r *Relayer) resolveSend(row *store.RelayerTx) (*Wallet, Backend, error) {
	w, b, err := r.resolve(row.Wallet, uint64(row.ChainID))
	if err != nil {
		return nil, nil, err
	}
	if from := common.HexToAddress(row.From); w.Address() != from {
		return nil, nil, fmt.Errorf("relayer: wallet %q is now %s, but the send was queued from %s (the wallet's key changed)",
			row.Wallet, w.Address().Hex(), from.Hex())
	}
	return w, b, nil
}

func (r *Relayer) resolve(wallet string, chainID uint64) (*Wallet, Backend, error) {
	w, ok := r.cfg.Wallets[wallet]
	if !ok {
		return nil, nil, fmt.Errorf("relayer: unknown wallet %q", wallet)
	}
	b, ok := r.cfg.Networks[chainID]
	if !ok {
		return nil, nil, fmt.Errorf("relayer: no network for chain %d", chainID)
	}
	return w, b, nil
}
