package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Guard names a fixed-window counter in rflow.rate_limit_buckets.
type Guard string

// Guards kept in Postgres.
const (
	GuardRateLimit Guard = "rate_limit" // rate_limit with durable: true
	GuardThrottle  Guard = "throttle"
)

// TakeWindowSlot counts one admission in the current fixed window of
// (workflow, guard) — windows are aligned to the Unix epoch in multiples of
// per, on Postgres's clock — unless the window already holds max. It is one
// INSERT … ON CONFLICT DO UPDATE … WHERE count < max statement: racing
// callers serialise on the row, so a window never admits more than max, and
// the count lives in Postgres, so a restart cannot reset a live window. It
// returns whether the slot was taken and when the window ends.
func TakeWindowSlot(ctx context.Context, db DBTX, workflow string, guard Guard, max int, per time.Duration) (bool, time.Time, error) {
	var start time.Time
	var ok bool
	err := db.QueryRow(ctx, `
		WITH w AS (SELECT to_timestamp(floor(extract(epoch FROM now()) / $3) * $3) AS start),
		took AS (
			INSERT INTO rflow.rate_limit_buckets AS b (workflow, guard, window_start, window_end, count)
			SELECT $1, $2, w.start, w.start + make_interval(secs => $3), 1 FROM w
			ON CONFLICT (workflow, guard, window_start) DO UPDATE SET count = b.count + 1, window_end = EXCLUDED.window_end
			WHERE b.count < $4
			RETURNING 1)
		SELECT w.start, EXISTS (SELECT 1 FROM took) FROM w`,
		workflow, string(guard), per.Seconds(), max).Scan(&start, &ok)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("%s window of %s: %w", guard, workflow, err)
	}
	return ok, start.Add(per), nil
}

// TxTime returns now() of db's transaction: its start, the time Postgres
// stamps on every row it writes (created_at defaults). A guard that windows
// admissions by it puts each run's recorded start in the window that
// counted it.
func TxTime(ctx context.Context, db DBTX) (time.Time, error) {
	var now time.Time
	if err := db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("transaction time: %w", err)
	}
	return now, nil
}

// DeleteEndedWindows deletes at most limit windows that ended more than an
// hour ago (windows without a recorded end, written before migration 027,
// are left alone). The hour covers a transaction that started inside a
// window and counts into it late: its window must still hold the count.
func DeleteEndedWindows(ctx context.Context, db DBTX, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("delete ended guard windows: limit must be positive, got %d", limit)
	}
	tag, err := db.Exec(ctx, `
		DELETE FROM rflow.rate_limit_buckets
		WHERE (workflow, guard, window_start) IN (
			SELECT workflow, guard, window_start FROM rflow.rate_limit_buckets
			WHERE window_end < now() - interval '1 hour'
			ORDER BY window_end
			LIMIT $1
			FOR UPDATE SKIP LOCKED)`, limit)
	if err != nil {
		return 0, fmt.Errorf("delete ended guard windows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// HoldRun parks a run in status throttled until wake (the end of the
// window that refused it), under concurrency key key when it has one.
func HoldRun(ctx context.Context, db DBTX, id uuid.UUID, wake time.Time, key *string) error {
	_, err := db.Exec(ctx, `
		UPDATE rflow.workflow_runs SET status = 'throttled', wake_at = $2, updated_at = now(),
			concurrency_key = COALESCE($3, concurrency_key)
		WHERE id = $1 AND status IN ('queued', 'throttled')`, id, wake, key)
	if err != nil {
		return fmt.Errorf("hold throttled run %s: %w", id, err)
	}
	return nil
}

// HasThrottledRuns reports whether workflow has runs waiting in status
// throttled (with key, only those of that concurrency key): a fresh claim
// then waits behind them, so runs start in claim order. wake is the latest
// of their wake_at: the claim cannot start before that.
func HasThrottledRuns(ctx context.Context, db DBTX, workflow string, key *string) (ok bool, wake time.Time, err error) {
	var latest *time.Time
	err = db.QueryRow(ctx, `SELECT count(*) > 0, max(wake_at) FROM rflow.workflow_runs
		WHERE workflow_name = $1 AND status = 'throttled' AND ($2::text IS NULL OR concurrency_key = $2)`,
		workflow, key).Scan(&ok, &latest)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("throttled runs of %s: %w", workflow, err)
	}
	if latest != nil {
		wake = *latest
	}
	return ok, wake, nil
}

// concurrencyLockClass is the first key of the advisory locks on
// (workflow, concurrency key) ("RFCC"; the node locks use "RFLN").
const concurrencyLockClass = 0x52464343

// TakeConcurrencySlot sets run's concurrency key and reports whether fewer
// than max other runs of workflow with that key are in flight (claimed,
// not held, not finished). A transaction-scoped advisory lock on (workflow,
// key) serialises racing admissions until commit, so max holds across
// processes.
func TakeConcurrencySlot(ctx context.Context, tx pgx.Tx, workflow, key string, run uuid.UUID, max int) (bool, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2 || '/' || $3))`,
		concurrencyLockClass, workflow, key); err != nil {
		return false, fmt.Errorf("lock concurrency key of %s: %w", workflow, err)
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs
		WHERE workflow_name = $1 AND concurrency_key = $2 AND id <> $3
		  AND status NOT IN ('throttled', 'completed', 'failed', 'cancelled')`, workflow, key, run).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("in-flight runs of %s: %w", workflow, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE rflow.workflow_runs SET concurrency_key = $2 WHERE id = $1`, run, key); err != nil {
		return false, fmt.Errorf("set concurrency key of run %s: %w", run, err)
	}
	return n < max, nil
}

// ThrottledWorkflows lists the workflows with throttled runs.
func ThrottledWorkflows(ctx context.Context, db DBTX) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT workflow_name FROM rflow.workflow_runs WHERE status = 'throttled'`)
	if err != nil {
		return nil, fmt.Errorf("workflows with throttled runs: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("workflows with throttled runs: %w", err)
	}
	return names, nil
}

// NextThrottledRun locks the oldest throttled run of workflow (claim order:
// created_at, then id) whose concurrency key is not in skip, or returns
// nil. A concurrent releaser holding it makes this one wait rather than
// skip ahead, so release order is FIFO.
func NextThrottledRun(ctx context.Context, db DBTX, workflow string, skip []string) (*Run, *string, error) {
	var key *string
	if skip == nil {
		skip = []string{} // NULL would match nothing
	}
	row := db.QueryRow(ctx, `
		SELECT `+runColumns+`, concurrency_key FROM rflow.workflow_runs
		WHERE workflow_name = $1 AND status = 'throttled'
		  AND (concurrency_key IS NULL OR NOT concurrency_key = ANY($2))
		ORDER BY created_at, id LIMIT 1
		FOR UPDATE`, workflow, skip)
	r, err := scanRun(keyRow{row, &key})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("next throttled run of %s: %w", workflow, err)
	}
	return r, key, nil
}

// keyRow scans one extra trailing column into key.
type keyRow struct {
	pgx.Row
	key **string
}

func (k keyRow) Scan(dest ...any) error { return k.Row.Scan(append(dest, k.key)...) }

// ReleaseRun moves a throttled run back to queued; the caller writes its
// start in the same transaction.
func ReleaseRun(ctx context.Context, db DBTX, id uuid.UUID) error {
	if _, err := db.Exec(ctx, `UPDATE rflow.workflow_runs SET status = 'queued', wake_at = NULL, updated_at = now()
		WHERE id = $1 AND status = 'throttled'`, id); err != nil {
		return fmt.Errorf("release throttled run %s: %w", id, err)
	}
	return nil
}
