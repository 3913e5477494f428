package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A rehearsal's clock (rflow test) skips time by moving a run's timers:
// advancing the run's clock by d is the same as bringing every deadline it
// waits for d nearer, and that needs nothing of the engine, which reads
// the real time as a live one does. These functions touch only the run
// they are given and the jobs of a rehearsal's own River schema.

// NextRunTimer is the earliest deadline run waits for: a delay's wake time,
// a wait_for's timeout, a pending approval's expiry. ok is false when it
// waits for none.
func NextRunTimer(ctx context.Context, db DBTX, run uuid.UUID) (at time.Time, ok bool, err error) {
	var next *time.Time
	err = db.QueryRow(ctx, `
		SELECT min(t) FROM (
			SELECT wake_at AS t FROM rflow.step_runs WHERE run_id = $1 AND status = 'waiting' AND wake_at IS NOT NULL
			UNION ALL
			SELECT deadline FROM rflow.waits WHERE run_id = $1 AND status IN ('waiting', 'armed') AND deadline IS NOT NULL
			UNION ALL
			SELECT expires_at FROM rflow.approvals WHERE run_id = $1 AND status = 'pending'
		) timers`, run).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next timer of run %s: %w", run, err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return *next, true, nil
}

// AdvanceRunTimers advances run's clock by d (a rehearsal's run, whose jobs
// live in riverSchema): its pending deadlines come d nearer, and its
// scheduled step jobs too (a first step's args are [run id, …], see
// jobs.FirstStepArgs). A job due within a second is made available at
// once: one that runs before its step's deadline snoozes itself again, as
// every timed step does, so waking early is safe and waking late is what
// this avoids (River's scheduler promotes due jobs only every few seconds).
func AdvanceRunTimers(ctx context.Context, db DBTX, riverSchema string, run uuid.UUID, d time.Duration) error {
	if !rehearsalSchema.MatchString(riverSchema) {
		return fmt.Errorf("rehearsal schema %q: want rehearsal_ and 32 hex digits", riverSchema)
	}
	jobs := pgx.Identifier{riverSchema, "river_job"}.Sanitize()
	state := pgx.Identifier{riverSchema, "river_job_state"}.Sanitize()
	for _, q := range []string{
		`UPDATE rflow.step_runs SET wake_at = wake_at - ($2::bigint * interval '1 microsecond') WHERE run_id = $1 AND status = 'waiting' AND wake_at IS NOT NULL`,
		`UPDATE rflow.workflow_runs SET wake_at = wake_at - ($2::bigint * interval '1 microsecond') WHERE id = $1 AND status IN ('waiting_delay', 'waiting_event', 'waiting_approval') AND wake_at IS NOT NULL`,
		`UPDATE rflow.waits SET deadline = deadline - ($2::bigint * interval '1 microsecond') WHERE run_id = $1 AND status IN ('waiting', 'armed') AND deadline IS NOT NULL`,
		`UPDATE rflow.approvals SET expires_at = expires_at - ($2::bigint * interval '1 microsecond') WHERE run_id = $1 AND status = 'pending'`,
		`UPDATE ` + jobs + ` SET
			scheduled_at = CASE WHEN scheduled_at - ($2::bigint * interval '1 microsecond') <= now() + interval '1 second' THEN now() ELSE scheduled_at - ($2::bigint * interval '1 microsecond') END,
			state = CASE WHEN scheduled_at - ($2::bigint * interval '1 microsecond') <= now() + interval '1 second' THEN 'available'::` + state + ` ELSE state END
		WHERE state = 'scheduled' AND (args->>'run_id' = $1::text OR args ? $1::text)`,
	} {
		if _, err := db.Exec(ctx, q, run, d.Microseconds()); err != nil {
			return fmt.Errorf("advance the clock of run %s: %w", run, err)
		}
	}
	return nil
}
