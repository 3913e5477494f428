package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WaitStatus is where a parked wait_for stands (the waits.status column).
type WaitStatus string

// Wait statuses. A wait is live while waiting or armed.
const (
	WaitWaiting   WaitStatus = "waiting"
	WaitArmed     WaitStatus = "armed"
	WaitMatched   WaitStatus = "matched"
	WaitTimedOut  WaitStatus = "timed_out"
	WaitFailed    WaitStatus = "failed"
	WaitCancelled WaitStatus = "cancelled"
)

// Wait is the persisted condition of one wait_for step attempt.
type Wait struct {
	ID            int64     `json:"id"`
	RunID         uuid.UUID `json:"run_id"`
	StepKey       string    `json:"step_key"`
	StepID        string    `json:"step_id"`
	Attempt       int       `json:"attempt"`
	ChainID       int64     `json:"chain_id"`
	Contract      string    `json:"contract"`
	Event         string    `json:"event"`
	Address       string    `json:"address"`
	Topic         string    `json:"topic"`
	MatchKey      string    `json:"match_key"`
	Where         *string   `json:"where,omitempty"`
	Confirmations int       `json:"confirmations"`
	// Finality, when set ("safe" or "finalized"), replaces Confirmations:
	// the wait settles once its candidate's block is at or below the
	// chain's block of that tag (indexer.finality).
	Finality     *string         `json:"finality,omitempty"`
	FromBlock    int64           `json:"from_block"`
	LookbackDone bool            `json:"lookback_done"`
	Deadline     *time.Time      `json:"deadline,omitempty"`
	OnTimeout    string          `json:"on_timeout"`
	Status       WaitStatus      `json:"status"`
	CandBlock    *int64          `json:"candidate_block,omitempty"`
	CandHash     *string         `json:"candidate_block_hash,omitempty"`
	CandIndex    *int            `json:"candidate_log_index,omitempty"`
	EventData    json.RawMessage `json:"event_data,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	SettledAt    *time.Time      `json:"settled_at,omitempty"`
	// Workflow is the run's workflow name: a wait feed matches only the
	// waits of runs its engine may move on (a rehearsal's own schema).
	Workflow string `json:"-"`
}

// waitColumns select from rflow.waits as w.
const waitColumns = `w.id, w.run_id, w.step_key, w.step_id, w.attempt, w.chain_id, w.contract, w.event, w.address,
	w.topic, w.match_key, w.where_src, w.confirmations, w.from_block, w.lookback_done, w.deadline, w.on_timeout,
	w.status, w.cand_block, w.cand_hash, w.cand_index, w.event_data, w.created_at, w.settled_at,
	(SELECT r.workflow_name FROM rflow.workflow_runs r WHERE r.id = w.run_id), w.finality`

func scanWait(row pgx.Row) (*Wait, error) {
	var w Wait
	err := row.Scan(&w.ID, &w.RunID, &w.StepKey, &w.StepID, &w.Attempt, &w.ChainID, &w.Contract, &w.Event, &w.Address,
		&w.Topic, &w.MatchKey, &w.Where, &w.Confirmations, &w.FromBlock, &w.LookbackDone, &w.Deadline, &w.OnTimeout,
		&w.Status, &w.CandBlock, &w.CandHash, &w.CandIndex, &w.EventData, &w.CreatedAt, &w.SettledAt, &w.Workflow, &w.Finality)
	return &w, err
}

func collectWaits(rows pgx.Rows, err error, what string) ([]*Wait, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Wait, error) { return scanWait(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// InsertWait persists a wait's conditions and deadline, in the transaction
// that parks its step. A second insert of the same step attempt is a no-op.
func InsertWait(ctx context.Context, tx pgx.Tx, w Wait) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO rflow.waits (run_id, step_key, step_id, attempt, chain_id, contract, event, address, topic,
			match_key, where_src, confirmations, from_block, lookback_done, deadline, on_timeout, finality)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (run_id, step_key, attempt) DO NOTHING`,
		w.RunID, w.StepKey, w.StepID, w.Attempt, w.ChainID, w.Contract, w.Event, w.Address, w.Topic, w.MatchKey,
		w.Where, w.Confirmations, w.FromBlock, w.LookbackDone, w.Deadline, w.OnTimeout, w.Finality)
	if err != nil {
		return fmt.Errorf("park wait %s of run %s: %w", w.StepKey, w.RunID, err)
	}
	return nil
}

// GetWait returns the wait of a step attempt, or ErrNotFound.
func GetWait(ctx context.Context, db DBTX, runID uuid.UUID, key string, attempt int) (*Wait, error) {
	w, err := scanWait(db.QueryRow(ctx, `SELECT `+waitColumns+` FROM rflow.waits w
		WHERE w.run_id = $1 AND w.step_key = $2 AND w.attempt = $3`, runID, key, attempt))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("wait %s of run %s: %w", key, runID, err)
	}
	return w, nil
}

// RunWaits returns every wait of a run, oldest first (`runs show`).
func RunWaits(ctx context.Context, db DBTX, runID uuid.UUID) ([]*Wait, error) {
	rows, err := db.Query(ctx, `SELECT `+waitColumns+` FROM rflow.waits w WHERE w.run_id = $1 ORDER BY w.id`, runID)
	return collectWaits(rows, err, fmt.Sprintf("waits of run %s", runID))
}

// WaitFeed names the waits one log subscription serves: an event of a
// contract (Address "" for any emitter) on a chain.
type WaitFeed struct {
	ChainID int64
	Address string // lower-case hex, or ""
	Topic   string // the event's topic0, hex
}

// WaitCandidates returns the live waits of feed whose match key is one of
// keys (pass "" among them for the waits without one): the index lookup
// that spares testing every parked where against every log. With ids, only
// those waits.
func WaitCandidates(ctx context.Context, db DBTX, feed WaitFeed, keys []string, ids []int64) ([]*Wait, error) {
	rows, err := db.Query(ctx, `SELECT `+waitColumns+` FROM rflow.waits w
		WHERE w.chain_id = $1 AND w.topic = $2 AND w.match_key = ANY($3) AND w.status IN ('waiting', 'armed')
		  AND w.address = $4 AND ($5::bigint[] IS NULL OR w.id = ANY($5))
		ORDER BY w.id`, feed.ChainID, feed.Topic, keys, feed.Address, ids)
	return collectWaits(rows, err, "wait candidates")
}

// ArmWait records log (block, hash, index) as the candidate of a live wait
// and data as its decoded event. The earliest log in chain order wins: a
// later candidate never replaces an earlier one. It reports whether the
// wait took the candidate.
func ArmWait(ctx context.Context, tx pgx.Tx, id, block int64, hash string, index int, data []byte) (bool, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.waits SET status = 'armed', cand_block = $2, cand_hash = $3, cand_index = $4, event_data = $5
		WHERE id = $1 AND (status = 'waiting' OR (status = 'armed' AND (cand_block, cand_index) > ($2, $4)))`,
		id, block, hash, index, jsonText(data))
	if err != nil {
		return false, fmt.Errorf("arm wait %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Lookback is a wait whose gap between its from block and the feed's cursor
// has not been searched yet.
type Lookback struct {
	ID        int64
	FromBlock int64
}

// WaitLookbacks returns feed's live waits of ns's runs (and its
// rehearsals') still needing their lookback: another project's feed
// leaves them for the project's own.
func WaitLookbacks(ctx context.Context, db DBTX, feed WaitFeed, ns Namespace) ([]Lookback, error) {
	rows, err := db.Query(ctx, `SELECT id, from_block FROM rflow.waits
		WHERE chain_id = $1 AND topic = $2 AND address = $3 AND NOT lookback_done AND status IN ('waiting', 'armed')
		  AND EXISTS (SELECT 1 FROM rflow.workflow_runs r WHERE r.id = waits.run_id AND `+ns.filterWithRehearsals("r.workflow_name")+`)
		ORDER BY id`, feed.ChainID, feed.Topic, feed.Address)
	if err != nil {
		return nil, fmt.Errorf("wait lookbacks: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Lookback])
	if err != nil {
		return nil, fmt.Errorf("wait lookbacks: %w", err)
	}
	return out, nil
}

// FinishLookbacks marks the lookbacks of ids done.
func FinishLookbacks(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE rflow.waits SET lookback_done = true WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("finish wait lookbacks: %w", err)
	}
	return nil
}

// DeepWaits returns feed's armed waits whose candidate is at least their
// confirmations deep under head (or, under a finality tag, at or below the
// tag's block) and still in the canonical window (or
// older than it, or the window is empty: nothing to check it against).
func DeepWaits(ctx context.Context, db DBTX, feed WaitFeed, head int64) ([]*Wait, error) {
	rows, err := db.Query(ctx, `SELECT `+waitColumns+` FROM rflow.waits w
		WHERE w.chain_id = $1 AND w.topic = $2 AND w.address = $3 AND w.status = 'armed'
		  AND `+deepEnough("w.", "$4")+`
		  AND (w.cand_block < COALESCE((SELECT min(number) FROM indexer.blocks WHERE chain_id = $1), w.cand_block + 1)
		       OR EXISTS (SELECT 1 FROM indexer.blocks b
		                  WHERE b.chain_id = $1 AND b.number = w.cand_block AND b.hash = w.cand_hash))
		ORDER BY w.cand_block, w.cand_index, w.id`, feed.ChainID, feed.Topic, feed.Address, head)
	return collectWaits(rows, err, "deep waits")
}

// deepEnough is the SQL condition under which an armed wait (its columns
// prefixed with t) can settle under head (a parameter): its candidate is
// confirmations deep, or, for a wait under a finality tag, at or below the
// chain's block of that tag (with no tag seen yet, or one the window holds
// under another hash, never).
func deepEnough(t, head string) string {
	return `CASE WHEN ` + t + `finality IS NULL THEN ` + t + `cand_block + ` + t + `confirmations <= ` + head + `
		ELSE (` + t + `cand_block <= ` + head + ` AND ` + t + `cand_block <= coalesce((SELECT f.number FROM indexer.finality f
			WHERE f.chain_id = ` + t + `chain_id AND f.tag = ` + t + `finality AND ` + canonicalTag + `), -1)) END`
}

// EndWait moves a live wait to status (matched, timed_out or failed),
// fenced on it still being live; matched also requires its candidate to
// be deep enough under head. Lock the run first (GetRun forUpdate): every
// path that ends a wait does, so they serialise in one order. It reports
// whether this call ended it.
func EndWait(ctx context.Context, tx pgx.Tx, id int64, status WaitStatus, head int64) (bool, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.waits SET status = $2, settled_at = now()
		WHERE id = $1 AND status IN ('waiting', 'armed')
		  AND ($2 <> 'matched' OR (status = 'armed' AND `+deepEnough("rflow.waits.", "$3")+`))`, id, status, head)
	if err != nil {
		return false, fmt.Errorf("end wait %d as %s: %w", id, status, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CancelWaits cancels the live waits of a run (`runs cancel`).
func CancelWaits(ctx context.Context, tx pgx.Tx, runID uuid.UUID) error {
	if _, err := tx.Exec(ctx, `UPDATE rflow.waits SET status = 'cancelled', settled_at = now()
		WHERE run_id = $1 AND status IN ('waiting', 'armed')`, runID); err != nil {
		return fmt.Errorf("cancel waits of run %s: %w", runID, err)
	}
	return nil
}

// disarmWaits returns the armed waits of a chain whose candidate is at or
// past fromBlock to waiting, in a reorg's transaction: the candidate left
// the canonical chain before it was deep enough. The reorg rewinds the
// feeds' cursors in the same transaction, so the new chain's logs are
// matched again.
func disarmWaits(ctx context.Context, tx pgx.Tx, chainID, fromBlock int64) error {
	if _, err := tx.Exec(ctx, `
		UPDATE rflow.waits SET status = 'waiting', cand_block = NULL, cand_hash = NULL, cand_index = NULL,
			event_data = NULL
		WHERE chain_id = $1 AND status = 'armed' AND cand_block >= $2`, chainID, fromBlock); err != nil {
		return fmt.Errorf("re-arm waits of chain %d from %d: %w", chainID, fromBlock, err)
	}
	return nil
}

// WaitStep is one step a live wait is parked at: its workflow generation
// and step id, one per feed (chain, address, topic).
type WaitStep struct {
	Workflow   string
	Generation int64
	StepID     string
}

// LiveWaitSteps returns a step per feed that live waits are parked on: the
// feeds that must keep being followed whatever is deployed now, for the
// runs of ns and its rehearsals.
func LiveWaitSteps(ctx context.Context, db DBTX, ns Namespace) ([]WaitStep, error) {
	rows, err := db.Query(ctx, `
		SELECT DISTINCT ON (w.chain_id, w.address, w.topic) r.workflow_name, r.generation, w.step_id
		FROM rflow.waits w JOIN rflow.workflow_runs r ON r.id = w.run_id
		WHERE w.status IN ('waiting', 'armed') AND `+ns.filterWithRehearsals("r.workflow_name")+`
		ORDER BY w.chain_id, w.address, w.topic, r.generation DESC`)
	if err != nil {
		return nil, fmt.Errorf("live wait steps: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[WaitStep])
	if err != nil {
		return nil, fmt.Errorf("live wait steps: %w", err)
	}
	return out, nil
}

// CancelWaits queues the cancellation of a run's live waits: a run that
// ends (another branch failed it, say) leaves no wait behind.
func (w *Writes) CancelWaits(runID uuid.UUID) {
	w.batch.Queue(`UPDATE rflow.waits SET status = 'cancelled', settled_at = now()
		WHERE run_id = $1 AND status IN ('waiting', 'armed')`, runID)
	w.exec(fmt.Sprintf("cancel waits of run %s", runID))
}
