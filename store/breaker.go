package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Trip is the outcome of a circuit breaker check that paused a workflow.
type Trip struct {
	Workflow string
	// Failures is how many failed runs the window held.
	Failures int
	Reason   string
	At       time.Time
}

// TripBreaker pauses workflow, in tx, when at least failures of its runs
// failed in the last window, counting only failures after its last resume;
// it returns nil when the breaker holds (or the workflow is already
// paused). The caller has just failed a run in tx.
//
// The workflow's row is locked before the count, and the count is a
// statement of its own, so concurrent failing runs are serialised: each
// counts every failure committed before it took the lock, plus its own.
// Exactly one of them sees the threshold reached on an unpaused workflow,
// and that one trips it.
func TripBreaker(ctx context.Context, tx pgx.Tx, workflow string, failures int, window time.Duration) (*Trip, error) {
	var paused bool
	var since *time.Time
	err := tx.QueryRow(ctx, `SELECT paused, resumed_at FROM rflow.workflows WHERE name = $1 FOR NO KEY UPDATE`,
		workflow).Scan(&paused, &since)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("circuit breaker of %s: %w", workflow, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("circuit breaker of %s: lock: %w", workflow, err)
	}
	if paused {
		return nil, nil
	}
	var n int
	err = tx.QueryRow(ctx, `
		SELECT count(*) FROM rflow.workflow_runs
		WHERE workflow_name = $1 AND status = 'failed'
		  AND finished_at > now() - make_interval(secs => $2)
		  AND ($3::timestamptz IS NULL OR finished_at > $3)`,
		workflow, window.Seconds(), since).Scan(&n)
	if err != nil {
		return nil, fmt.Errorf("circuit breaker of %s: count failures: %w", workflow, err)
	}
	if n < failures {
		return nil, nil
	}
	t := &Trip{Workflow: workflow, Failures: n, Reason: fmt.Sprintf("circuit breaker: %d failed runs in %s", n, ShortDuration(window))}
	err = tx.QueryRow(ctx, `
		UPDATE rflow.workflows SET paused = true, paused_at = now(), paused_reason = $2, updated_at = now()
		WHERE name = $1 RETURNING paused_at`, workflow, t.Reason).Scan(&t.At)
	if err != nil {
		return nil, fmt.Errorf("circuit breaker of %s: pause: %w", workflow, err)
	}
	return t, nil
}

// ShortDuration formats d as written in YAML: 10m, 1h30m, 45s (not 10m0s).
func ShortDuration(d time.Duration) string {
	s := d.String()
	if len(s) > 2 && s[len(s)-2:] == "0s" && d >= time.Minute && d%time.Minute == 0 {
		s = s[:len(s)-2]
	}
	if len(s) > 2 && s[len(s)-2:] == "0m" && d >= time.Hour && d%time.Hour == 0 {
		s = s[:len(s)-2]
	}
	return s
}
