package store

import (
	"context"
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
			INSERT INTO rflow.rate_limit_buckets AS b (workflow, guard, window_start, count)
			SELECT $1, $2, w.start, 1 FROM w
			ON CONFLICT (workflow, guard, window_start) DO UPDATE SET count = b.count + 1 WHERE b.count < $4
			RETURNING 1)
		SELECT w.start, EXISTS (SELECT 1 FROM took) FROM w`,
		workflow, string(guard), per.Seconds(), max).Scan(&start, &ok)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("%s window of %s: %w", guard, workflow, err)
	}
	return ok, start.Add(per), nil
}

// DeleteOldWindows deletes the buckets whose window started before before.
func DeleteOldWindows(ctx context.Context, db DBTX, before time.Time) error {
	if _, err := db.Exec(ctx, `DELETE FROM rflow.rate_limit_buckets WHERE window_start < $1`, before); err != nil {
		return fmt.Errorf("delete old rate limit windows: %w", err)
	}
	return nil
}

// HoldRuns parks fresh runs in status throttled until wake (the end of the
// window that refused them).
func HoldRuns(ctx context.Context, db DBTX, ids []uuid.UUID, wake time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.Exec(ctx, `
		UPDATE rflow.workflow_runs SET status = 'throttled', wake_at = $2, updated_at = now()
		WHERE id = ANY($1) AND status IN ('queued', 'throttled')`, ids, wake)
	if err != nil {
		return fmt.Errorf("hold %d throttled run(s): %w", len(ids), err)
	}
	return nil
}

// HasThrottledRuns reports whether workflow has runs waiting in status
// throttled: a fresh claim then waits behind them, so runs start in claim
// order.
func HasThrottledRuns(ctx context.Context, db DBTX, workflow string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM rflow.workflow_runs
		WHERE workflow_name = $1 AND status = 'throttled')`, workflow).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("throttled runs of %s: %w", workflow, err)
	}
	return ok, nil
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
// created_at, then id), or returns nil. A concurrent releaser holding it
// makes this one wait rather than skip ahead, so release order is FIFO.
func NextThrottledRun(ctx context.Context, db DBTX, workflow string) (*Run, error) {
	r, err := scanRun(db.QueryRow(ctx, `
		SELECT `+runColumns+` FROM rflow.workflow_runs
		WHERE workflow_name = $1 AND status = 'throttled'
		ORDER BY created_at, id LIMIT 1
		FOR UPDATE`, workflow))
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("next throttled run of %s: %w", workflow, err)
	}
	return r, nil
}

// ReleaseRun moves a throttled run back to queued (its start is written in
// the same transaction), or, when still refused, moves its wake time.
func ReleaseRun(ctx context.Context, db DBTX, id uuid.UUID) error {
	if _, err := db.Exec(ctx, `UPDATE rflow.workflow_runs SET status = 'queued', wake_at = NULL, updated_at = now()
		WHERE id = $1 AND status = 'throttled'`, id); err != nil {
		return fmt.Errorf("release throttled run %s: %w", id, err)
	}
	return nil
}
