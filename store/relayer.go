package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrRelayerTxNotFound is returned when no relayer transaction matches.
var ErrRelayerTxNotFound = errors.New("relayer transaction not found")

// Relayer transaction statuses. The first three are in flight; the rest are
// final. StatusSimulated is the final state of a dry-run send.
const (
	RelayerPending   = "pending"
	RelayerInMempool = "in_mempool"
	RelayerMined     = "mined"
	RelayerConfirmed = "confirmed"
	RelayerFailed    = "failed"
	RelayerExpired   = "expired"
	RelayerCancelled = "cancelled"
	RelayerReplaced  = "replaced"
	RelayerDropped   = "dropped"
	RelayerSimulated = "simulated"
)

// RelayerTx is one row of relayer.transactions. Amounts are exact big
// integers (numeric(78,0) in Postgres); a nil pointer is SQL NULL.
type RelayerTx struct {
	ID                int64
	TxID              uuid.UUID
	ExternalID        string
	Wallet            string
	ChainID           int64
	From              string
	To                string
	Value             *big.Int
	Data              []byte
	Nonce             *int64
	GasLimit          *int64
	MaxFee            *big.Int
	MaxPriorityFee    *big.Int
	GasPrice          *big.Int
	FeeCap            *big.Int
	Status            string
	Hash              *string
	MinedBlock        *int64
	MinedBlockHash    *string
	ReceiptStatus     *int16
	GasUsed           *int64
	Error             *string
	Confirmations     int
	DryRun            bool
	Simulation        []byte
	ExpiresAt         *time.Time
	CancelRequestedAt *time.Time
	JobID             *int64
	CheckedAt         time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	BroadcastAt       *time.Time
	MinedAt           *time.Time
	FinishedAt        *time.Time
	// OrphanedAt is when the send last lost the block it was mined in.
	OrphanedAt *time.Time
}

// Final reports whether the transaction reached a state it never leaves.
func (t *RelayerTx) Final() bool {
	switch t.Status {
	case RelayerPending, RelayerInMempool, RelayerMined:
		return false
	}
	return true
}

const relayerTxColumns = `id, tx_id, external_id, wallet, chain_id, from_address, to_address, value::text, data,
	nonce, gas_limit, max_fee::text, max_priority_fee::text, gas_price::text, fee_cap::text, status, tx_hash,
	mined_block, mined_block_hash, receipt_status, gas_used, error, confirmations, dry_run, simulation,
	expires_at, cancel_requested_at, job_id, checked_at, created_at, updated_at, broadcast_at, mined_at, finished_at, orphaned_at`

func scanRelayerTx(row pgx.Row) (*RelayerTx, error) {
	var t RelayerTx
	var value string
	var maxFee, maxPrio, gasPrice, feeCap *string
	err := row.Scan(&t.ID, &t.TxID, &t.ExternalID, &t.Wallet, &t.ChainID, &t.From, &t.To, &value, &t.Data,
		&t.Nonce, &t.GasLimit, &maxFee, &maxPrio, &gasPrice, &feeCap, &t.Status, &t.Hash,
		&t.MinedBlock, &t.MinedBlockHash, &t.ReceiptStatus, &t.GasUsed, &t.Error, &t.Confirmations, &t.DryRun, &t.Simulation,
		&t.ExpiresAt, &t.CancelRequestedAt, &t.JobID, &t.CheckedAt, &t.CreatedAt, &t.UpdatedAt, &t.BroadcastAt, &t.MinedAt, &t.FinishedAt, &t.OrphanedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrRelayerTxNotFound
	}
	if err != nil {
		return nil, err
	}
	if t.Value, err = parseNumeric(&value); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		dst **big.Int
		src *string
	}{{&t.MaxFee, maxFee}, {&t.MaxPriorityFee, maxPrio}, {&t.GasPrice, gasPrice}, {&t.FeeCap, feeCap}} {
		if *f.dst, err = parseNumeric(f.src); err != nil {
			return nil, err
		}
	}
	return &t, nil
}

func parseNumeric(s *string) (*big.Int, error) {
	if s == nil {
		return nil, nil
	}
	v, ok := new(big.Int).SetString(*s, 10)
	if !ok {
		return nil, fmt.Errorf("numeric %q is not an integer", *s)
	}
	return v, nil
}

// numeric renders a big integer for a $n::numeric parameter; nil is NULL.
func numeric(v *big.Int) *string {
	if v == nil {
		return nil
	}
	s := v.String()
	return &s
}

// NewRelayerTx is what QueueRelayerTx inserts.
type NewRelayerTx struct {
	TxID          uuid.UUID
	ExternalID    string
	Wallet        string
	ChainID       int64
	From          string
	To            string
	Value         *big.Int
	Data          []byte
	GasLimit      *int64
	FeeCap        *big.Int
	Confirmations int
	DryRun        bool
	ExpiresAt     *time.Time
	// JobID is the River job that drives the send (see SetRelayerTxJob);
	// 0: none yet.
	JobID int64
}

// QueueRelayerTx inserts a send with INSERT … ON CONFLICT (external_id) DO
// NOTHING. On a duplicate external_id it returns the existing row and
// created=false; nothing about the existing row changes.
func QueueRelayerTx(ctx context.Context, q DBTX, n NewRelayerTx) (*RelayerTx, bool, error) {
	value := n.Value
	if value == nil {
		value = new(big.Int)
	}
	data := n.Data
	if data == nil {
		data = []byte{}
	}
	t, err := scanRelayerTx(q.QueryRow(ctx, `
		INSERT INTO relayer.transactions
			(tx_id, external_id, wallet, chain_id, from_address, to_address, value, data, gas_limit, fee_cap,
			 confirmations, dry_run, expires_at, job_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7::numeric, $8, $9, $10::numeric, $11, $12, $13, NULLIF($14, 0))
		ON CONFLICT (external_id) DO NOTHING
		RETURNING `+relayerTxColumns,
		n.TxID, n.ExternalID, n.Wallet, n.ChainID, n.From, n.To, numeric(value), data, n.GasLimit, numeric(n.FeeCap),
		n.Confirmations, n.DryRun, n.ExpiresAt, n.JobID))
	if err == nil {
		return t, true, nil
	}
	if !errors.Is(err, ErrRelayerTxNotFound) {
		return nil, false, fmt.Errorf("queue relayer tx %s: %w", n.ExternalID, err)
	}
	t, err = RelayerTxByExternalID(ctx, q, n.ExternalID)
	if err != nil {
		return nil, false, fmt.Errorf("queue relayer tx %s: existing row: %w", n.ExternalID, err)
	}
	return t, false, nil
}

// RelayerTxByExternalID returns the send queued under externalID, or
// ErrRelayerTxNotFound.
func RelayerTxByExternalID(ctx context.Context, q DBTX, externalID string) (*RelayerTx, error) {
	return scanRelayerTx(q.QueryRow(ctx, `SELECT `+relayerTxColumns+` FROM relayer.transactions WHERE external_id = $1`, externalID))
}

// RelayerTxByID returns the send with the given tx_id, or ErrRelayerTxNotFound.
func RelayerTxByID(ctx context.Context, q DBTX, txID uuid.UUID) (*RelayerTx, error) {
	return scanRelayerTx(q.QueryRow(ctx, `SELECT `+relayerTxColumns+` FROM relayer.transactions WHERE tx_id = $1`, txID))
}

// LockRelayerTx returns the send with the given tx_id and holds its row lock
// until tx ends, so workers acting on one send serialise.
func LockRelayerTx(ctx context.Context, tx pgx.Tx, txID uuid.UUID) (*RelayerTx, error) {
	return scanRelayerTx(tx.QueryRow(ctx, `SELECT `+relayerTxColumns+` FROM relayer.transactions WHERE tx_id = $1 FOR UPDATE`, txID))
}

// InFlightRelayerTxs lists sends that are not final and that no worker has
// looked at since checkedBefore, oldest first, at most limit of them.
func InFlightRelayerTxs(ctx context.Context, q DBTX, checkedBefore time.Time, limit int) ([]*RelayerTx, error) {
	rows, err := q.Query(ctx, `SELECT `+relayerTxColumns+` FROM relayer.transactions
		WHERE status IN ('pending', 'in_mempool', 'mined') AND checked_at < $1
		ORDER BY checked_at LIMIT $2`, checkedBefore, limit)
	if err != nil {
		return nil, fmt.Errorf("list in-flight relayer txs: %w", err)
	}
	out, err := collectRelayerTxs(rows)
	if err != nil {
		return nil, fmt.Errorf("list in-flight relayer txs: %w", err)
	}
	return out, nil
}

func collectRelayerTxs(rows pgx.Rows) ([]*RelayerTx, error) {
	defer rows.Close()
	var out []*RelayerTx
	for rows.Next() {
		t, err := scanRelayerTx(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetRelayerTxJob hands the send to River job jobID: from now on only that
// job's fenced writes take effect.
func SetRelayerTxJob(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64) error {
	_, err := q.Exec(ctx, `UPDATE relayer.transactions SET job_id = $2, checked_at = now(), updated_at = now()
		WHERE tx_id = $1`, txID, jobID)
	if err != nil {
		return fmt.Errorf("hand relayer tx %s to job %d: %w", txID, jobID, err)
	}
	return nil
}

// CheckRelayerTx records that job jobID looked at the send now and returns
// it, or nil when there is nothing for the job to do: the send is final or
// another job drives it (the caller is a duplicate or stale).
func CheckRelayerTx(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64) (*RelayerTx, error) {
	t, err := scanRelayerTx(q.QueryRow(ctx, `UPDATE relayer.transactions SET checked_at = now()
		WHERE tx_id = $1 AND job_id = $2 AND status IN ('pending', 'in_mempool', 'mined')
		RETURNING `+relayerTxColumns, txID, jobID))
	if errors.Is(err, ErrRelayerTxNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("check relayer tx %s: %w", txID, err)
	}
	return t, nil
}

// RelayerTxGas is the gas a send will be signed with.
type RelayerTxGas struct {
	GasLimit       int64
	MaxFee         *big.Int // EIP-1559; nil for legacy
	MaxPriorityFee *big.Int // EIP-1559; nil for legacy
	GasPrice       *big.Int // legacy; nil for EIP-1559
}

// AssignNonce gives a send the next nonce of its wallet on its chain, with
// the gas to sign with and the fee cap (kept if one is set), in one
// statement: it locks the send, then takes the nonce under the lock of the
// (address, chain) row of relayer.nonces and advances it, then writes the
// nonce onto the send. So a nonce is persisted with its owner before
// anything is signed, and a rolled-back or failed assignment hands out
// nothing. The nonce is never below chainPending, the chain's pending nonce,
// which heals a wallet used outside the relayer.
//
// replacing is the send's current nonce when it is being moved to a new one
// (someone else used it), nil for a first assignment. It returns the updated
// send, or nil when nothing was assigned: the send is final, driven by
// another job, or its nonce is not replacing (someone got there first), or
// (a first assignment) it was cancelled: a cancel committed before this
// statement guarantees the send is never signed.
func AssignNonce(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64, replacing *int64, chainPending uint64,
	gas RelayerTxGas, feeCap *big.Int) (*RelayerTx, error) {
	rows, err := AssignNonces(ctx, q, chainPending, []NonceAsk{{TxID: txID, JobID: jobID, Replacing: replacing, Gas: gas, FeeCap: feeCap}})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// NonceAsk is one send's part of AssignNonces: the send, its driving job,
// the nonce it is replacing (nil: a first assignment), the gas to sign with
// and its fee cap.
type NonceAsk struct {
	TxID      uuid.UUID
	JobID     int64
	Replacing *int64
	Gas       RelayerTxGas
	FeeCap    *big.Int
}

// AssignNonces is AssignNonce for several sends of one wallet on one chain
// in one statement: the sends that qualify (as AssignNonce's) get the next
// nonces in asks' order, under one lock of the wallet's relayer.nonces row
// and one advance of it by their number. It returns the sends that got one,
// in nonce order; a send missing from the result got nothing.
func AssignNonces(ctx context.Context, q DBTX, chainPending uint64, asks []NonceAsk) ([]*RelayerTx, error) {
	n := len(asks)
	txIDs, jobIDs, replacing := make([][16]byte, n), make([]int64, n), make([]*int64, n)
	gasLimits, maxFees, tips, gasPrices, feeCaps := make([]int64, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	for i, a := range asks {
		txIDs[i], jobIDs[i], replacing[i] = a.TxID, a.JobID, a.Replacing
		gasLimits[i], maxFees[i], tips[i], gasPrices[i] = a.Gas.GasLimit, numeric(a.Gas.MaxFee), numeric(a.Gas.MaxPriorityFee), numeric(a.Gas.GasPrice)
		feeCaps[i] = numeric(a.FeeCap)
	}
	// The sends are locked first, then the wallet's row: every send here
	// is from one address on one chain (more than one pair would make
	// reserved several rows and number them wrongly, so the statement
	// refuses them by returning nothing).
	rows, err := q.Query(ctx, `
		WITH ask AS (
			SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], $5::numeric[], $6::numeric[],
				$7::numeric[], $8::numeric[]) WITH ORDINALITY
				AS a(ask_tx, ask_job, ask_replacing, ask_gas_limit, ask_max_fee, ask_tip, ask_gas_price, ask_fee_cap, ask_order)
		), send AS (
			SELECT a.*, t.from_address AS send_from, t.chain_id AS send_chain
			FROM relayer.transactions t JOIN ask a ON t.tx_id = a.ask_tx
			WHERE t.job_id = a.ask_job AND t.status IN ('pending', 'in_mempool', 'mined')
				AND t.nonce IS NOT DISTINCT FROM a.ask_replacing AND (t.cancel_requested_at IS NULL OR a.ask_replacing IS NOT NULL)
			ORDER BY t.tx_id
			FOR UPDATE OF t
		), wallet AS (
			SELECT min(send_from) AS address, min(send_chain) AS chain_id, count(*) AS taking FROM send
			HAVING count(*) > 0 AND count(DISTINCT (send_from, send_chain)) = 1
		), reserved AS (
			INSERT INTO relayer.nonces AS n (address, chain_id, next_nonce, reconciled_at)
			SELECT address, chain_id, $9::bigint + taking, now() FROM wallet
			ON CONFLICT (address, chain_id) DO UPDATE
				SET next_nonce = GREATEST(n.next_nonce, $9::bigint) + (SELECT taking FROM wallet), updated_at = now()
			RETURNING next_nonce - (SELECT taking FROM wallet) AS first_taken
		), numbered AS (
			SELECT send.*, row_number() OVER (ORDER BY ask_order) - 1 AS ask_rank FROM send
		)
		UPDATE relayer.transactions SET nonce = first_taken + ask_rank, gas_limit = ask_gas_limit, max_fee = ask_max_fee,
			max_priority_fee = ask_tip, gas_price = ask_gas_price, fee_cap = COALESCE(fee_cap, ask_fee_cap),
			status = 'pending', tx_hash = NULL, updated_at = now(), checked_at = now()
		FROM numbered, reserved
		WHERE tx_id = ask_tx
		RETURNING `+relayerTxColumns,
		txIDs, jobIDs, replacing, gasLimits, maxFees, tips, gasPrices, feeCaps, int64(chainPending))
	if err != nil {
		return nil, fmt.Errorf("assign nonces to %d relayer txs: %w", n, err)
	}
	out, err := collectRelayerTxs(rows)
	if err != nil {
		return nil, fmt.Errorf("assign nonces to %d relayer txs: %w", n, err)
	}
	slices.SortFunc(out, func(a, b *RelayerTx) int { return cmp.Compare(*a.Nonce, *b.Nonce) })
	return out, nil
}

// SetRelayerTxFees records bumped fees as the send's current ones (fenced
// on the driving job).
func SetRelayerTxFees(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64, gas RelayerTxGas) error {
	_, err := q.Exec(ctx, `UPDATE relayer.transactions SET gas_limit = $3, max_fee = $4::numeric,
			max_priority_fee = $5::numeric, gas_price = $6::numeric, updated_at = now()
		WHERE tx_id = $1 AND job_id = $2`,
		txID, jobID, gas.GasLimit, numeric(gas.MaxFee), numeric(gas.MaxPriorityFee), numeric(gas.GasPrice))
	if err != nil {
		return fmt.Errorf("set fees of relayer tx %s: %w", txID, err)
	}
	return nil
}

// ReconcileNonce raises the stored next nonce of (address, chainID) to the
// chain's pending nonce when the wallet was used outside the relayer, and
// returns the result. It never lowers it: every nonce below it belongs to a
// send that will consume it on chain (its own transaction or a no-op), and
// only the send holding a nonce may give it back (FinishRelayerTxs).
func ReconcileNonce(ctx context.Context, q DBTX, address string, chainID int64, chainPending uint64) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `
		INSERT INTO relayer.nonces AS n (address, chain_id, next_nonce, reconciled_at)
		VALUES ($1, $2, $3, now())
		ON CONFLICT (address, chain_id) DO UPDATE
			SET next_nonce = GREATEST(n.next_nonce, EXCLUDED.next_nonce), reconciled_at = now(), updated_at = now()
		RETURNING next_nonce`, address, chainID, int64(chainPending)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reconcile nonce for %s on chain %d: %w", address, chainID, err)
	}
	return n, nil
}

// RelayerBroadcast is one signed transaction sent (or about to be sent) for a
// send: the original, a gas bump or a cancelling no-op.
type RelayerBroadcast struct {
	Hash      string
	TxID      uuid.UUID
	Kind      string // send or cancel
	Nonce     int64
	Gas       RelayerTxGas
	Raw       []byte
	CreatedAt time.Time
	SentAt    *time.Time
}

// RecordBroadcast stores a signed transaction before it is sent, so a crash
// right after sending still leaves its hash to look for. Recording the same
// hash twice for a send is a no-op; a hash already recorded for another send
// is an error (a hash has exactly one owner).
func RecordBroadcast(ctx context.Context, q DBTX, b RelayerBroadcast) error {
	return RecordBroadcasts(ctx, q, []RelayerBroadcast{b})
}

// RecordBroadcasts is RecordBroadcast for several signed transactions in
// one statement.
func RecordBroadcasts(ctx context.Context, q DBTX, bs []RelayerBroadcast) error {
	n := len(bs)
	hashes, txIDs, kinds, nonces, gasLimits := make([]string, n), make([][16]byte, n), make([]string, n), make([]int64, n), make([]int64, n)
	maxFees, tips, gasPrices, raws := make([]*string, n), make([]*string, n), make([]*string, n), make([][]byte, n)
	for i, b := range bs {
		hashes[i], txIDs[i], kinds[i], nonces[i], gasLimits[i] = b.Hash, b.TxID, b.Kind, b.Nonce, b.Gas.GasLimit
		maxFees[i], tips[i], gasPrices[i], raws[i] = numeric(b.Gas.MaxFee), numeric(b.Gas.MaxPriorityFee), numeric(b.Gas.GasPrice), b.Raw
	}
	rows, err := q.Query(ctx, `
		WITH b AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::bigint[], $5::bigint[], $6::numeric[], $7::numeric[],
				$8::numeric[], $9::bytea[]) AS b(hash, tx_id, kind, nonce, gas_limit, max_fee, max_priority_fee, gas_price, raw)
		), ins AS (
			INSERT INTO relayer.broadcasts (hash, tx_id, kind, nonce, gas_limit, max_fee, max_priority_fee, gas_price, raw)
			SELECT * FROM b
			ON CONFLICT (hash) DO NOTHING
			RETURNING hash, tx_id
		)
		SELECT hash, tx_id FROM ins
		UNION ALL SELECT r.hash, r.tx_id FROM relayer.broadcasts r JOIN b ON r.hash = b.hash`,
		hashes, txIDs, kinds, nonces, gasLimits, maxFees, tips, gasPrices, raws)
	if err != nil {
		return fmt.Errorf("record %d broadcasts: %w", n, err)
	}
	owners := map[string]uuid.UUID{}
	var hash string
	var owner uuid.UUID
	_, err = pgx.ForEachRow(rows, []any{&hash, &owner}, func() error {
		owners[hash] = owner
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d broadcasts: %w", n, err)
	}
	for _, b := range bs {
		switch owner, ok := owners[b.Hash]; {
		case !ok:
			return fmt.Errorf("record broadcast %s for relayer tx %s: recorded by no one (a concurrent insert); retry", b.Hash, b.TxID)
		case owner != b.TxID:
			return fmt.Errorf("record broadcast %s for relayer tx %s: the hash belongs to relayer tx %s", b.Hash, b.TxID, owner)
		}
	}
	return nil
}

// MarkBroadcastSent records that the node accepted the signed transaction
// and moves its send to in_mempool (a send already further along stays).
// The send's part is fenced on the driving job.
func MarkBroadcastSent(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64, hash string) error {
	return MarkBroadcastsSent(ctx, q, []BroadcastSent{{TxID: txID, JobID: jobID, Hash: hash}})
}

// BroadcastSent is one send's part of MarkBroadcastsSent.
type BroadcastSent struct {
	TxID  uuid.UUID
	JobID int64
	Hash  string
}

// MarkBroadcastsSent is MarkBroadcastSent for several sends in one statement.
func MarkBroadcastsSent(ctx context.Context, q DBTX, sent []BroadcastSent) error {
	n := len(sent)
	txIDs, jobIDs, hashes := make([][16]byte, n), make([]int64, n), make([]string, n)
	for i, s := range sent {
		txIDs[i], jobIDs[i], hashes[i] = s.TxID, s.JobID, s.Hash
	}
	_, err := q.Exec(ctx, `
		WITH s AS (
			SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS s(s_tx, s_job, s_hash)
		), b AS (
			UPDATE relayer.broadcasts SET sent_at = COALESCE(sent_at, now()) FROM s WHERE hash = s_hash
		)
		UPDATE relayer.transactions SET status = CASE WHEN status = 'pending' THEN 'in_mempool' ELSE status END,
			tx_hash = CASE WHEN status IN ('pending', 'in_mempool') THEN s_hash ELSE tx_hash END,
			broadcast_at = COALESCE(broadcast_at, now()), updated_at = now(), error = NULL
		FROM s
		WHERE tx_id = s_tx AND job_id = s_job`, txIDs, jobIDs, hashes)
	if err != nil {
		return fmt.Errorf("mark %d broadcasts sent: %w", n, err)
	}
	return nil
}

// RelayerBroadcasts lists every signed transaction recorded for a send,
// oldest first.
func RelayerBroadcasts(ctx context.Context, q DBTX, txID uuid.UUID) ([]RelayerBroadcast, error) {
	rows, err := q.Query(ctx, `SELECT hash, tx_id, kind, nonce, gas_limit, max_fee::text, max_priority_fee::text,
			gas_price::text, raw, created_at, sent_at
		FROM relayer.broadcasts WHERE tx_id = $1 ORDER BY created_at, hash`, txID)
	if err != nil {
		return nil, fmt.Errorf("list broadcasts of %s: %w", txID, err)
	}
	defer rows.Close()
	var out []RelayerBroadcast
	for rows.Next() {
		var b RelayerBroadcast
		var maxFee, maxPrio, gasPrice *string
		if err := rows.Scan(&b.Hash, &b.TxID, &b.Kind, &b.Nonce, &b.Gas.GasLimit, &maxFee, &maxPrio, &gasPrice,
			&b.Raw, &b.CreatedAt, &b.SentAt); err != nil {
			return nil, fmt.Errorf("list broadcasts of %s: %w", txID, err)
		}
		if b.Gas.MaxFee, err = parseNumeric(maxFee); err != nil {
			return nil, err
		}
		if b.Gas.MaxPriorityFee, err = parseNumeric(maxPrio); err != nil {
			return nil, err
		}
		if b.Gas.GasPrice, err = parseNumeric(gasPrice); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// SetRelayerTxError records why the last attempt to move a send forward did
// not succeed (it stays in flight and will be retried). Fenced on the job.
func SetRelayerTxError(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64, msg string) error {
	_, err := q.Exec(ctx, `UPDATE relayer.transactions SET error = $3, updated_at = now()
		WHERE tx_id = $1 AND job_id = $2`, txID, jobID, msg)
	if err != nil {
		return fmt.Errorf("set error of relayer tx %s: %w", txID, err)
	}
	return nil
}

// RelayerReceipt is what a receipt says about a mined send.
type RelayerReceipt struct {
	Hash      string
	Block     int64
	BlockHash string
	Status    int16
	GasUsed   int64
}

// SetRelayerTxMined records the receipt of a send (status mined). Fenced
// on the driving job.
func SetRelayerTxMined(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64, r RelayerReceipt) error {
	_, err := q.Exec(ctx, `UPDATE relayer.transactions SET status = 'mined', tx_hash = $3, mined_block = $4,
			mined_block_hash = $5, receipt_status = $6, gas_used = $7, mined_at = COALESCE(mined_at, now()),
			updated_at = now()
		WHERE tx_id = $1 AND job_id = $2 AND status IN ('pending', 'in_mempool', 'mined')`,
		txID, jobID, r.Hash, r.Block, r.BlockHash, r.Status, r.GasUsed)
	if err != nil {
		return fmt.Errorf("record receipt of relayer tx %s: %w", txID, err)
	}
	return nil
}

// OrphanRelayerReceipt handles a mined send whose block left the canonical
// chain: the receipt it has is kept in relayer.orphaned_receipts, and the
// send takes next, its receipt on the new chain (re-included), or with nil
// goes back to in_mempool (dropped; the fee-bump clock restarts). Fenced on
// the driving job; it reports whether the send was still mined and this
// job's.
func OrphanRelayerReceipt(ctx context.Context, q DBTX, txID uuid.UUID, jobID int64, next *RelayerReceipt) (bool, error) {
	status, hash, blockHash := "in_mempool", (*string)(nil), (*string)(nil)
	var block, gasUsed *int64
	var rstatus *int16
	if next != nil {
		status, hash, blockHash, block, gasUsed, rstatus = "mined", &next.Hash, &next.BlockHash, &next.Block, &next.GasUsed, &next.Status
	}
	tag, err := q.Exec(ctx, `
		WITH cur AS (
			SELECT tx_id, tx_hash, mined_block, mined_block_hash FROM relayer.transactions
			WHERE tx_id = $1 AND job_id = $2 AND status = 'mined'
			FOR UPDATE
		), kept AS (
			INSERT INTO relayer.orphaned_receipts (tx_id, hash, block_number, block_hash)
			SELECT tx_id, tx_hash, mined_block, mined_block_hash FROM cur
			ON CONFLICT DO NOTHING
		)
		UPDATE relayer.transactions t SET status = $3, tx_hash = COALESCE($4, t.tx_hash), mined_block = $5,
			mined_block_hash = $6, receipt_status = $7, gas_used = $8,
			mined_at = CASE WHEN $5::bigint IS NULL THEN NULL ELSE now() END,
			orphaned_at = now(), updated_at = now()
		FROM cur WHERE t.tx_id = cur.tx_id`,
		txID, jobID, status, hash, block, blockHash, rstatus, gasUsed)
	if err != nil {
		return false, fmt.Errorf("orphan receipt of relayer tx %s: %w", txID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RelayerOrphan is a receipt a send once had in a block that left the
// canonical chain.
type RelayerOrphan struct {
	Hash       string
	Block      int64
	BlockHash  string
	DetectedAt time.Time
}

// RelayerOrphanedReceipts lists the send's orphaned receipts, oldest first.
func RelayerOrphanedReceipts(ctx context.Context, q DBTX, txID uuid.UUID) ([]RelayerOrphan, error) {
	rows, err := q.Query(ctx, `SELECT hash, block_number, block_hash, detected_at FROM relayer.orphaned_receipts
		WHERE tx_id = $1 ORDER BY detected_at, block_number`, txID)
	if err != nil {
		return nil, fmt.Errorf("list orphaned receipts of %s: %w", txID, err)
	}
	defer rows.Close()
	var out []RelayerOrphan
	for rows.Next() {
		var o RelayerOrphan
		if err := rows.Scan(&o.Hash, &o.Block, &o.BlockHash, &o.DetectedAt); err != nil {
			return nil, fmt.Errorf("list orphaned receipts of %s: %w", txID, err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// RelayerFinal is the outcome FinishRelayerTxs records for a send.
type RelayerFinal struct {
	Status     string
	Error      string // empty: keep NULL
	Simulation []byte // JSON, for dry runs and simulation failures
	Receipt    *RelayerReceipt
	// Sent is the hash of a broadcast the node accepted that is not
	// recorded as sent yet (see MarkBroadcastSent); empty: none.
	Sent string
	// ReleaseNonce gives the send's nonce back when the node never took
	// the send: if no later nonce was handed out, the next send reuses it;
	// otherwise the hole is left for the gap filler.
	ReleaseNonce bool
}

// RelayerFinish is one send's part of FinishRelayerTxs.
type RelayerFinish struct {
	TxID  uuid.UUID
	JobID int64
	Final RelayerFinal
}

// FinishRelayerTxs moves in-flight sends to their final statuses in one
// statement (and one more per nonce given back), each fenced on its driving
// job: it returns the sends it moved; one missing from the result was
// final already or belongs to another job (that caller is stale and must
// not act).
func FinishRelayerTxs(ctx context.Context, tx pgx.Tx, fs []RelayerFinish) ([]*RelayerTx, error) {
	n := len(fs)
	txIDs, jobIDs, statuses, errs, sims := make([][16]byte, n), make([]int64, n), make([]string, n), make([]*string, n), make([]*string, n)
	hashes, blocks, blockHashes, receipts, gasUsed, sent := make([]*string, n), make([]*int64, n), make([]*string, n), make([]*int16, n), make([]*int64, n), make([]*string, n)
	release := map[uuid.UUID]bool{}
	for i, f := range fs {
		txIDs[i], jobIDs[i], statuses[i], sims[i] = f.TxID, f.JobID, f.Final.Status, jsonText(f.Final.Simulation)
		if f.Final.Error != "" {
			errs[i] = &f.Final.Error
		}
		if r := f.Final.Receipt; r != nil {
			hashes[i], blockHashes[i], blocks[i], gasUsed[i], receipts[i] = &r.Hash, &r.BlockHash, &r.Block, &r.GasUsed, &r.Status
		}
		if f.Final.Sent != "" {
			sent[i] = &f.Final.Sent
		}
		if f.Final.ReleaseNonce {
			release[f.TxID] = true
		}
	}
	rows, err := tx.Query(ctx, `
		WITH f AS (
			SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::jsonb[], $6::text[], $7::bigint[],
				$8::text[], $9::smallint[], $10::bigint[], $11::text[])
				AS f(f_tx, f_job, f_status, f_error, f_simulation, f_hash, f_block, f_block_hash, f_receipt_status, f_gas_used, f_sent)
		), sent AS (
			UPDATE relayer.broadcasts b SET sent_at = COALESCE(b.sent_at, now()) FROM f WHERE b.hash = f_sent AND b.tx_id = f_tx
		)
		UPDATE relayer.transactions SET status = f_status, error = f_error, simulation = COALESCE(f_simulation, simulation),
			tx_hash = COALESCE(f_hash, tx_hash), mined_block = COALESCE(f_block, mined_block),
			mined_block_hash = COALESCE(f_block_hash, mined_block_hash), receipt_status = COALESCE(f_receipt_status, receipt_status),
			gas_used = COALESCE(f_gas_used, gas_used),
			broadcast_at = CASE WHEN f_sent IS NULL THEN broadcast_at ELSE COALESCE(broadcast_at, now()) END,
			finished_at = now(), updated_at = now(), checked_at = now()
		FROM f
		WHERE tx_id = f_tx AND job_id = f_job AND status IN ('pending', 'in_mempool', 'mined')
		RETURNING `+relayerTxColumns,
		txIDs, jobIDs, statuses, errs, sims, hashes, blocks, blockHashes, receipts, gasUsed, sent)
	if err != nil {
		return nil, fmt.Errorf("finish %d relayer txs: %w", n, err)
	}
	out, err := collectRelayerTxs(rows)
	if err != nil {
		return nil, fmt.Errorf("finish %d relayer txs: %w", n, err)
	}
	for _, t := range out {
		if !release[t.TxID] || t.Nonce == nil {
			continue
		}
		// The refused bytes go too: the next send at this nonce may sign
		// the very same transaction (same hash) and must own it.
		_, err := tx.Exec(ctx, `
			WITH released AS (
				UPDATE relayer.nonces SET next_nonce = next_nonce - 1, updated_at = now()
				WHERE address = $1 AND chain_id = $2 AND next_nonce = $3::bigint + 1
				RETURNING 1
			)
			DELETE FROM relayer.broadcasts WHERE tx_id = $4 AND nonce = $3 AND EXISTS (SELECT 1 FROM released)`,
			t.From, t.ChainID, *t.Nonce, t.TxID)
		if err != nil {
			return nil, fmt.Errorf("release nonce %d of relayer tx %s: %w", *t.Nonce, t.TxID, err)
		}
	}
	return out, nil
}

// RequestRelayerTxCancel marks an in-flight send for cancellation, in q (the
// caller's transaction, so a run's cancel and its send's commit together):
// a send without a nonce then never gets one (AssignNonce refuses it) and its
// job ends it cancelled; a broadcast one is replaced by its monitor with a
// same-nonce no-op. It returns the send as it is now and whether it was
// marked (false: unknown, ErrRelayerTxNotFound, or final already).
func RequestRelayerTxCancel(ctx context.Context, q DBTX, externalID string) (*RelayerTx, bool, error) {
	t, err := scanRelayerTx(q.QueryRow(ctx, `UPDATE relayer.transactions
		SET cancel_requested_at = COALESCE(cancel_requested_at, now()), updated_at = now()
		WHERE external_id = $1 AND status IN ('pending', 'in_mempool', 'mined')
		RETURNING `+relayerTxColumns, externalID))
	if err == nil {
		return t, true, nil
	}
	if !errors.Is(err, ErrRelayerTxNotFound) {
		return nil, false, fmt.Errorf("cancel relayer tx %s: %w", externalID, err)
	}
	t, err = scanRelayerTx(q.QueryRow(ctx, `SELECT `+relayerTxColumns+` FROM relayer.transactions
		WHERE external_id = $1`, externalID))
	if err != nil {
		return nil, false, fmt.Errorf("cancel relayer tx %s: %w", externalID, err)
	}
	return t, false, nil
}

// RelayerNonceInFlight reports whether an in-flight send of the wallet holds
// nonce on the chain (so a gap there is that send's to fill).
func RelayerNonceInFlight(ctx context.Context, q DBTX, address string, chainID, nonce int64) (bool, error) {
	var held bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM relayer.transactions
		WHERE from_address = $1 AND chain_id = $2 AND nonce = $3 AND status IN ('pending', 'in_mempool', 'mined'))`,
		address, chainID, nonce).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("nonce %d of %s on chain %d: %w", nonce, address, chainID, err)
	}
	return held, nil
}

// EndDiscardedChainTxs ends, cancelled with reason, every send of chainID
// that is not final, and forgets the chain's wallet nonces, in tx: they
// belong to a chain that is gone (rflow dev's discarded dev chain, see
// ChainReplacement.Reorg), where nothing of them can be mined any more, and
// the new chain under the same id starts every wallet at its own pending
// nonce. Their relayer jobs, seeing them final, stop; a run cancelled after
// this finds them ended and sends no no-op on the new chain. It returns how
// many sends it ended.
func EndDiscardedChainTxs(ctx context.Context, tx pgx.Tx, chainID int64, reason string) (int64, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE relayer.transactions SET status = 'cancelled', error = $2, finished_at = now(), updated_at = now()
		WHERE chain_id = $1 AND status IN ('pending', 'in_mempool', 'mined')`, chainID, reason)
	if err != nil {
		return 0, fmt.Errorf("end the sends of discarded chain %d: %w", chainID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM relayer.nonces WHERE chain_id = $1`, chainID); err != nil {
		return 0, fmt.Errorf("forget the wallet nonces of discarded chain %d: %w", chainID, err)
	}
	return tag.RowsAffected(), nil
}

// RetrackedTx is one send RetrackRelayerTxs tracks again.
type RetrackedTx struct {
	TxID       uuid.UUID
	ExternalID string
}

// RetrackRelayerTxs moves the confirmed sends of chainID whose receipt's
// block, at or past fork, is no longer the window's block at that height
// back to mined (their receipt kept), in the reorg's transaction tx, and
// returns their tx ids: the relayer then tracks them again as any mined
// send whose block left the chain (re-included, or its very bytes sent
// again). Only confirmed sends: a reverted or replaced one re-sent could
// move value its step says did not.
func RetrackRelayerTxs(ctx context.Context, tx pgx.Tx, chainID, fork int64) ([]RetrackedTx, error) {
	rows, err := tx.Query(ctx, `
		UPDATE relayer.transactions t SET status = 'mined', finished_at = NULL, updated_at = now(), checked_at = now()
		WHERE t.chain_id = $1 AND t.status = 'confirmed' AND t.mined_block >= $2
		  AND NOT EXISTS (SELECT 1 FROM indexer.blocks b
		                  WHERE b.chain_id = t.chain_id AND b.number = t.mined_block AND b.hash = t.mined_block_hash)
		RETURNING t.tx_id, t.external_id`, chainID, fork)
	if err != nil {
		return nil, fmt.Errorf("re-track confirmed sends of chain %d from %d: %w", chainID, fork, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RetrackedTx])
	if err != nil {
		return nil, fmt.Errorf("re-track confirmed sends of chain %d from %d: %w", chainID, fork, err)
	}
	return ids, nil
}
