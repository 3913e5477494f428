package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Response is an on_reorg response: what rflow does about one run whose
// triggering log one reorg (fork) orphaned. Its run-state columns (status,
// position, epoch, error) are read through LoadJournal as a Run of
// ReorgJournal; these are its own.
type Response struct {
	ID         uuid.UUID
	RunID      uuid.UUID
	ForkBlock  int64
	ChainID    int64
	Depth      int
	OldHash    string
	NewHash    string
	DecideAt   int64
	Attempt    int
	Status     RunStatus
	Error      *string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	// ReincludedAt is when the log came back after the response was
	// decided (see ReincludeRuns); nil if it has not.
	ReincludedAt *time.Time
}

const responseColumns = `id, run_id, fork_block, chain_id, depth, old_hash, new_hash, decide_at, attempt, status,
	error, created_at, updated_at, started_at, finished_at, reincluded_at`

func scanResponse(row pgx.Row) (*Response, error) {
	var r Response
	err := row.Scan(&r.ID, &r.RunID, &r.ForkBlock, &r.ChainID, &r.Depth, &r.OldHash, &r.NewHash, &r.DecideAt,
		&r.Attempt, &r.Status, &r.Error, &r.CreatedAt, &r.UpdatedAt, &r.StartedAt, &r.FinishedAt, &r.ReincludedAt)
	r.Error = scrub(r.Error)
	return &r, err
}

// ReorgResponses is what OpenResponses needs of a reorg: the fork, its
// hashes, and after how many blocks past the fork it is decided.
type ReorgResponses struct {
	ChainID   int64
	ForkBlock int64
	Depth     int
	OldHash   string
	NewHash   string
	// Confirmations is the network's depth: a response is decided once the
	// run's ingestion has passed ForkBlock + Confirmations.
	Confirmations int
}

// OpenResponses records, in the reorg's transaction, one pending response
// per (run, fork) for the orphaned runs of event triggers among runs (a
// block or read trigger has no log to re-include or compensate). A (run,
// fork) already answered as reincluded (the log came back, then a later
// reorg at the same fork block orphaned it again) is pending once more; any
// other existing response is left alone, so a fork is compensated at most
// once. It returns the ids of the responses now pending.
func OpenResponses(ctx context.Context, tx pgx.Tx, r ReorgResponses, runs []uuid.UUID) ([]uuid.UUID, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(runs))
	for i := range runs {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO rflow.reorg_runs (id, run_id, fork_block, chain_id, depth, old_hash, new_hash, decide_at)
		SELECT c.id, r.id, $3::bigint, $4::bigint, $5::int, $6::text, $7::text, $3::bigint + $8::bigint
		FROM unnest($1::uuid[], $2::uuid[]) AS c(id, run_id)
		JOIN rflow.workflow_runs r ON r.id = c.run_id AND r.trigger_kind = 'event'
		ORDER BY r.id
		ON CONFLICT (run_id, fork_block) DO UPDATE
			SET status = 'pending', depth = excluded.depth, old_hash = excluded.old_hash, new_hash = excluded.new_hash,
				decide_at = excluded.decide_at, finished_at = NULL, updated_at = now()
			WHERE rflow.reorg_runs.status = 'reincluded'
		RETURNING id`, ids, runs, r.ForkBlock, r.ChainID, r.Depth, r.OldHash, r.NewHash, int64(r.Confirmations))
	if err != nil {
		return nil, fmt.Errorf("open reorg responses on chain %d at fork %d: %w", r.ChainID, r.ForkBlock, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("open reorg responses on chain %d at fork %d: %w", r.ChainID, r.ForkBlock, err)
	}
	return out, nil
}

// ResponseWorkflows maps reorg responses to the stored workflow names of
// the runs they answer: a response's job goes to its run's project's queue.
func ResponseWorkflows(ctx context.Context, db DBTX, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := db.Query(ctx, `
		SELECT rr.id, r.workflow_name FROM rflow.reorg_runs rr JOIN rflow.workflow_runs r ON r.id = rr.run_id
		WHERE rr.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("workflows of reorg responses: %w", err)
	}
	out := map[uuid.UUID]string{}
	var id uuid.UUID
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error { out[id] = name; return nil }); err != nil {
		return nil, fmt.Errorf("workflows of reorg responses: %w", err)
	}
	return out, nil
}

// GetResponse loads one response; with forUpdate it locks its row.
func GetResponse(ctx context.Context, db DBTX, id uuid.UUID, forUpdate bool) (*Response, error) {
	q := `SELECT ` + responseColumns + ` FROM rflow.reorg_runs WHERE id = $1`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	r, err := scanResponse(db.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("reorg response %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load reorg response %s: %w", id, err)
	}
	return r, nil
}

// ResponseOf returns the response to run's orphaning at fork (a
// compensation send's key names both).
func ResponseOf(ctx context.Context, db DBTX, runID uuid.UUID, fork int64) (*Response, error) {
	r, err := scanResponse(db.QueryRow(ctx, `SELECT `+responseColumns+` FROM rflow.reorg_runs
		WHERE run_id = $1 AND fork_block = $2`, runID, fork))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("reorg response of run %s at fork %d: %w", runID, fork, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reorg response of run %s at fork %d: %w", runID, fork, err)
	}
	return r, nil
}

// FailedResponse returns the newest failed response of run, or nil: what
// an operator's retry of the run retries.
func FailedResponse(ctx context.Context, db DBTX, runID uuid.UUID) (*Response, error) {
	r, err := scanResponse(db.QueryRow(ctx, `SELECT `+responseColumns+` FROM rflow.reorg_runs
		WHERE run_id = $1 AND status = 'failed' ORDER BY created_at DESC, id DESC LIMIT 1`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed response of run %s: %w", runID, err)
	}
	return r, nil
}

// RunResponses returns a run's responses, oldest first.
func RunResponses(ctx context.Context, db DBTX, runID uuid.UUID) ([]*Response, error) {
	rows, err := db.Query(ctx, `SELECT `+responseColumns+` FROM rflow.reorg_runs WHERE run_id = $1 ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("reorg responses of run %s: %w", runID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Response, error) { return scanResponse(r) })
}

// Reincluded is what ReincludeRuns found: orphaned runs whose log is back
// in the canonical chain.
type Reincluded struct {
	// Pending counts the runs whose response was still pending: it ends
	// as reincluded when decided, and the run goes on.
	Pending int
	// Late are the runs whose response had been decided already.
	Late []LateReinclusion
}

// LateReinclusion is an orphaned run whose log came back after its reorg
// response was decided (the run was stopped, the on_reorg steps started).
type LateReinclusion struct {
	RunID      uuid.UUID
	ResponseID uuid.UUID
	// Stopped: the decision cancelled the run, which had not finished
	// (its finish is the decision's: the same transaction).
	Stopped bool
}

// ReincludeRuns is called by the claim gate with the event claims that
// found their key taken: a log whose run is orphaned that is claimed again
// is back in the canonical chain (the same transaction, the same position
// in it). The run is un-orphaned and takes the log's new block. With a
// response still pending, that response then ends as reincluded; with one
// already decided, the response records the re-inclusion (reincluded_at)
// and the run is returned in Late for the caller to resume.
func ReincludeRuns(ctx context.Context, tx pgx.Tx, claims []Claim) (Reincluded, error) {
	var out Reincluded
	var wfs, keys, hashes []string
	var blocks, chains []int64
	for _, c := range claims {
		if c.ChainID == 0 || c.BlockHash == "" {
			continue
		}
		wfs, keys, hashes = append(wfs, c.Workflow), append(keys, c.TriggerKey), append(hashes, c.BlockHash)
		blocks, chains = append(blocks, c.BlockNumber), append(chains, c.ChainID)
	}
	if len(keys) == 0 {
		return out, nil
	}
	// Lock the orphaned runs first, then update in a new statement: under
	// READ COMMITTED that statement's snapshot sees a decision that
	// committed while this one waited for the lock (its response is then
	// no longer pending), which a single UPDATE's EXISTS would not.
	if _, err := tx.Exec(ctx, `
		SELECT r.id FROM rflow.workflow_runs r
		JOIN unnest($1::text[], $2::text[]) AS c(workflow, key) ON r.workflow_name = c.workflow AND r.trigger_key = c.key
		WHERE r.orphaned_at IS NOT NULL
		ORDER BY r.id FOR UPDATE OF r`, wfs, keys); err != nil {
		return out, fmt.Errorf("re-include %d orphaned log(s): %w", len(keys), err)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.workflow_runs r SET orphaned_at = NULL, block_number = c.block, block_hash = c.hash, updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[]) AS c(workflow, key, block, hash, chain_id)
		WHERE r.workflow_name = c.workflow AND r.trigger_key = c.key AND r.chain_id = c.chain_id
		  AND r.orphaned_at IS NOT NULL
		  AND EXISTS (SELECT 1 FROM rflow.reorg_runs rr WHERE rr.run_id = r.id AND rr.status = 'pending')`,
		wfs, keys, blocks, hashes, chains)
	if err != nil {
		return out, fmt.Errorf("re-include %d orphaned log(s): %w", len(keys), err)
	}
	out.Pending = int(tag.RowsAffected())
	// The runs still orphaned have a decided response: the newest one
	// records the re-inclusion. A run the decision stopped finished in
	// the decision's transaction, so its finished_at is the response's
	// started_at.
	rows, err := tx.Query(ctx, `
		WITH late AS (
			SELECT DISTINCT ON (r.id) r.id AS run_id, rr.id AS resp_id, c.block, c.hash,
				(r.status = 'cancelled' AND r.finished_at = rr.started_at) AS stopped
			FROM rflow.workflow_runs r
			JOIN unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[]) AS c(workflow, key, block, hash, chain_id)
				ON r.workflow_name = c.workflow AND r.trigger_key = c.key AND r.chain_id = c.chain_id
			JOIN rflow.reorg_runs rr ON rr.run_id = r.id
			WHERE r.orphaned_at IS NOT NULL AND rr.status NOT IN ('pending', 'reincluded')
			ORDER BY r.id, rr.created_at DESC, rr.id DESC
		), runs AS (
			UPDATE rflow.workflow_runs r SET orphaned_at = NULL, block_number = late.block, block_hash = late.hash,
				updated_at = now()
			FROM late WHERE r.id = late.run_id
		), responses AS (
			UPDATE rflow.reorg_runs rr SET reincluded_at = now(), updated_at = now()
			FROM late WHERE rr.id = late.resp_id
		)
		SELECT run_id, resp_id, stopped FROM late ORDER BY run_id`, wfs, keys, blocks, hashes, chains)
	if err != nil {
		return out, fmt.Errorf("re-include %d orphaned log(s) after their decision: %w", len(keys), err)
	}
	out.Late, err = pgx.CollectRows(rows, pgx.RowToStructByPos[LateReinclusion])
	if err != nil {
		return out, fmt.Errorf("re-include %d orphaned log(s) after their decision: %w", len(keys), err)
	}
	return out, nil
}

// ReopenStopped makes a run that a reorg decision stopped run again, in
// tx: the same run at the same attempt, the steps the stop cancelled queued
// again at their own attempts, so every idempotency key is the one it had
// (an HTTP step's Idempotency-Key names the run's attempt, a send's
// external id the step's). Completed steps are untouched. A job the stop
// left behind (a delay that had not come due) may run the same step
// attempt as the caller's new job: the step's fences let one settle it, and
// its effect carries the same key either way. It returns the run and the
// steps to resume.
func ReopenStopped(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*Run, []*StepRun, error) {
	r, err := GetRun(ctx, tx, id, true)
	if err != nil {
		return nil, nil, err
	}
	if r.Status != RunCancelled {
		return nil, nil, fmt.Errorf("run %s is %s: only a stopped run is reopened", id, r.Status)
	}
	rows, err := tx.Query(ctx, `
		UPDATE rflow.step_runs SET status = 'queued', error = NULL, started_at = NULL, finished_at = NULL, held_at = NULL,
			carrier_job = NULL
		WHERE run_id = $1 AND status = 'cancelled'
		RETURNING `+stepColumns, id)
	if err != nil {
		return nil, nil, fmt.Errorf("reopen steps of run %s: %w", id, err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StepRun, error) { return scanStep(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("reopen steps of run %s: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `
		UPDATE rflow.workflow_runs SET status = 'running', error = NULL, failed_step = NULL, finished_at = NULL, updated_at = now()
		WHERE id = $1`, id); err != nil {
		return nil, nil, fmt.Errorf("reopen run %s: %w", id, err)
	}
	r.Status, r.Error, r.FailedStep, r.FinishedAt = RunRunning, nil, nil, nil
	return r, steps, nil
}

// Hold is what HoldStep did.
type Hold int

// Hold results.
const (
	// NotHeld: the run is not an orphan awaiting its decision; the step
	// runs as usual.
	NotHeld Hold = iota
	// Held: the step is held; its job completes without executing it.
	Held
	// HoldStale: the run finished (a decision cancelled it) or the step
	// moved on meanwhile: nothing to execute.
	HoldStale
)

// HoldStep holds a step of an orphaned run (held_at set, no job) while the
// run's reorg response is pending, in tx. The run row is locked first and
// read again, so a re-inclusion or a decision (both update that row)
// either committed before — and is seen — or waits for this transaction.
func HoldStep(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string, attempt int) (Hold, error) {
	var status RunStatus
	var orphaned bool
	if err := tx.QueryRow(ctx, `SELECT status, orphaned_at IS NOT NULL FROM rflow.workflow_runs WHERE id = $1 FOR UPDATE`,
		runID).Scan(&status, &orphaned); err != nil {
		return NotHeld, fmt.Errorf("hold step %s of run %s: %w", key, runID, err)
	}
	switch {
	case status.Terminal():
		return HoldStale, nil
	case !orphaned:
		return NotHeld, nil
	}
	var pending, held bool
	err := tx.QueryRow(ctx, `
		WITH p AS (SELECT EXISTS (SELECT 1 FROM rflow.reorg_runs WHERE run_id = $1 AND status = 'pending') AS pending),
		u AS (
			UPDATE rflow.step_runs SET held_at = now()
			WHERE run_id = $1 AND step_key = $2 AND attempt = $3 AND status IN ('queued', 'retrying', 'waiting')
			  AND (SELECT pending FROM p)
			RETURNING 1)
		SELECT (SELECT pending FROM p), EXISTS (SELECT 1 FROM u)`, runID, key, attempt).Scan(&pending, &held)
	switch {
	case err != nil:
		return NotHeld, fmt.Errorf("hold step %s of run %s: %w", key, runID, err)
	case !pending:
		return NotHeld, nil // an orphan with no response (a block or read trigger's)
	case !held:
		return HoldStale, nil
	}
	return Held, nil
}

// HeldStep is a step released from a hold: its job is enqueued again at
// its attempt.
type HeldStep struct {
	Key     string
	Attempt int
}

// ReleaseHeld un-holds the held steps of a run whose log came back, in tx,
// and returns them so their jobs are enqueued in the same transaction.
func ReleaseHeld(ctx context.Context, tx pgx.Tx, runID uuid.UUID) ([]HeldStep, error) {
	rows, err := tx.Query(ctx, `
		UPDATE rflow.step_runs SET held_at = NULL
		WHERE run_id = $1 AND held_at IS NOT NULL AND status IN ('queued', 'retrying', 'waiting')
		RETURNING step_key, attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("release held steps of run %s: %w", runID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[HeldStep])
	if err != nil {
		return nil, fmt.Errorf("release held steps of run %s: %w", runID, err)
	}
	return out, nil
}

// EndResponse ends a pending response as reincluded (the log came back), or
// starts it (status queued, started now) when compensate is set, fenced on
// it still being pending. It reports whether it was.
func EndResponse(ctx context.Context, tx pgx.Tx, id uuid.UUID, compensate bool) (bool, error) {
	q := `UPDATE rflow.reorg_runs SET status = 'reincluded', finished_at = now(), updated_at = now()
		WHERE id = $1 AND status = 'pending'`
	if compensate {
		q = `UPDATE rflow.reorg_runs SET status = 'queued', started_at = now(), updated_at = now()
			WHERE id = $1 AND status = 'pending'`
	}
	tag, err := tx.Exec(ctx, q, id)
	if err != nil {
		return false, fmt.Errorf("decide reorg response %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// DecisionPoint is how far the chain has come for a response's decision:
// the block of the run's ingestion cursor (task, phase) on chainID, -1 when
// it has none, and the chain's window head (-1 when empty).
func DecisionPoint(ctx context.Context, db DBTX, chainID int64, task, phase string) (cursor, head int64, err error) {
	err = db.QueryRow(ctx, `
		SELECT coalesce((SELECT block FROM indexer.cursors WHERE task = $2 AND phase = $3 AND chain_id = $1), -1),
		       coalesce((SELECT max(number) FROM indexer.blocks WHERE chain_id = $1), -1)`, chainID, task, phase).Scan(&cursor, &head)
	if err != nil {
		return 0, 0, fmt.Errorf("decision point on chain %d: %w", chainID, err)
	}
	return cursor, head, nil
}
