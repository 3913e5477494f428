package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// JoblessStep is a step the journal says is pending (queued, retrying, or
// waiting for a wake time its job is scheduled at) whose River job is gone:
// deleted in River UI, say, or lost in a restore that took the rflow schema
// and not the river one. Nothing else would ever run it.
type JoblessStep struct {
	Journal    Journal
	RunID      uuid.UUID
	Workflow   string
	Generation int64
	RunAttempt int
	StepKey    string
	Attempt    int
	// WakeAt is when the step's job was due (a delay's wake, a wait's
	// deadline, an approval's expiry); nil for a step due at once.
	WakeAt *time.Time
}

// joblessSQL finds JoblessSteps of one journal. A step needs a job when it
// is queued or retrying, or waiting with a wake time (delays, wait_for
// deadlines and approval expiries are scheduled jobs); a send waiting on
// its transaction is driven by the relayer, a wait_for without a deadline
// by its feed, and a step held for a pending reorg response (held_at) by
// that response, so none of them has one. A job counts whatever its
// state except completed (the job that parked a step completes with the
// park): a cancelled or discarded job was an operator's or River's
// decision, not a loss. A step carried inline by the job of the step
// before it (carrier_job, see carriedSQL) has that job for its own: the
// carrier's state counts the same way. Step and job are written in one commit, so one
// snapshot sees both or neither. Rehearsals' jobs live in their own
// queues or schemas and are never repaired here.
//
// The scan finds only ns's runs: a process repairs its own project's runs,
// into its own queue. With one, it checks a single step: $2 run id, $3
// step key, $4 run attempt, $5 step attempt.
func joblessSQL(j Journal, ns Namespace, one bool) string {
	run, gen, name := "r", "r.generation", "r.workflow_name"
	from := `rflow.step_runs s JOIN rflow.workflow_runs r ON r.id = s.run_id`
	if j == ReorgJournal {
		run, gen, name = "rr", "o.generation", "o.workflow_name"
		from = `rflow.reorg_step_runs s JOIN rflow.reorg_runs rr ON rr.id = s.run_id JOIN rflow.workflow_runs o ON o.id = rr.run_id`
	}
	only, live, scope := "", "", ns.filter(name)
	noJob := `NOT ((SELECT keys FROM live) ? jsonb_build_array(` + run + `.id::text, s.step_key, s.attempt)::text)`
	if one {
		scope = notRehearsal(name)
		// One step: two probes of River's GIN index on args.
		only = `AND ` + run + `.id = $2 AND s.step_key = $3 AND ` + run + `.attempt = $4 AND s.attempt = $5`
		noJob = `NOT EXISTS (
		      SELECT 1 FROM river.river_job j
		      WHERE ` + isStepJob + ` AND j.state <> 'completed'
		        AND (j.args @> jsonb_build_object('run_id', ` + run + `.id, 'step_key', s.step_key, 'attempt', s.attempt)
		             OR (s.attempt = 1 AND ` + run + `.attempt = 1
		                 AND j.args @> jsonb_build_array(` + run + `.id::text, s.step_key || '/' || ` + gen + `))))`
	} else {
		// The scan: the step jobs not completed, read once, whichever
		// args shape (StepArgs, or FirstStepArgs' [run id,
		// "step/generation"] at attempt 1), into one jsonb object whose
		// keys are their [run id, step, attempt]; each pending step is a
		// key lookup in it (a binary search). A probe per pending step
		// would read River's table once per step, and an anti-join
		// against the set is at the planner's mercy: on tables whose
		// statistics lag a burst (a backlog claimed just before a boot)
		// it chose a nested loop, pending steps × jobs.
		live = `WITH live AS MATERIALIZED (
		  SELECT coalesce(jsonb_object_agg(jsonb_build_array(` + stepJobRun + `, ` + stepJobStep + `,
		           CASE WHEN jsonb_typeof(j.args) = 'array' THEN 1 ELSE (j.args->>'attempt')::int END)::text, true), '{}') AS keys
		  FROM river.river_job j
		  WHERE ` + isStepJob + ` AND j.state <> 'completed')`
	}
	return live + `
		SELECT ` + run + `.id, ` + name + `, ` + gen + `, ` + run + `.attempt, s.step_key, s.attempt, s.wake_at
		FROM ` + from + `
		WHERE ` + run + `.status IN ('queued', 'running', 'waiting_delay', 'waiting_tx', 'waiting_event', 'waiting_approval')
		  AND ` + scope + `
		  AND (s.status IN ('queued', 'retrying') OR (s.status = 'waiting' AND s.wake_at IS NOT NULL))
		  AND s.held_at IS NULL
		  AND ` + noJob + `
		  AND NOT (` + carriedSQL + ` AND EXISTS (
		      SELECT 1 FROM river.river_job c WHERE c.id = s.carrier_job AND c.state <> 'completed'))
` + only + `
		ORDER BY ` + run + `.id, s.step_key
		LIMIT $1`
}

// JoblessSteps returns at most limit JoblessSteps of journal j among ns's
// runs.
func JoblessSteps(ctx context.Context, db DBTX, ns Namespace, j Journal, limit int) ([]JoblessStep, error) {
	rows, err := db.Query(ctx, joblessSQL(j, ns, false), limit)
	if err != nil {
		return nil, fmt.Errorf("find %s steps without a job: %w", j, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (JoblessStep, error) {
		s := JoblessStep{Journal: j}
		err := r.Scan(&s.RunID, &s.Workflow, &s.Generation, &s.RunAttempt, &s.StepKey, &s.Attempt, &s.WakeAt)
		return s, err
	})
}

// StillJobless locks s's run (or response) row and tells whether s is
// still pending without a job, at the same run attempt: the check a repair
// makes under the lock, so two processes repairing at once enqueue one
// job, not two.
func StillJobless(ctx context.Context, tx pgx.Tx, s JoblessStep) (bool, error) {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s.Journal.runs()+` WHERE id = $1 FOR UPDATE`, s.RunID); err != nil {
		return false, fmt.Errorf("lock %s %s: %w", s.Journal, s.RunID, err)
	}
	rows, err := tx.Query(ctx, joblessSQL(s.Journal, Namespace{}, true), 1, s.RunID, s.StepKey, s.RunAttempt, s.Attempt)
	if err != nil {
		return false, fmt.Errorf("recheck %s %s step %s: %w", s.Journal, s.RunID, s.StepKey, err)
	}
	defer rows.Close()
	found := rows.Next()
	return found, rows.Err()
}

// RecordRepair journals the repair of s under its run (a response's
// under the run it answers).
func RecordRepair(ctx context.Context, tx pgx.Tx, s JoblessStep) error {
	q := `INSERT INTO rflow.run_repairs (run_id, step_key, attempt) VALUES ($1, $2, $3)`
	if s.Journal == ReorgJournal {
		q = `INSERT INTO rflow.run_repairs (run_id, journal, response_id, step_key, attempt)
			SELECT run_id, 'reorg', id, $2, $3 FROM rflow.reorg_runs WHERE id = $1`
	}
	if _, err := tx.Exec(ctx, q, s.RunID, s.StepKey, s.Attempt); err != nil {
		return fmt.Errorf("record the repair of %s %s: %w", s.Journal, s.RunID, err)
	}
	return nil
}

// Repair is one repair of a run's step, for `runs show`.
type Repair struct {
	StepKey    string    `json:"step"`
	Attempt    int       `json:"attempt"`
	Response   *string   `json:"reorg_response,omitempty"`
	RepairedAt time.Time `json:"repaired_at"`
}

// RunRepairs lists the repairs of run id, oldest first.
func RunRepairs(ctx context.Context, db DBTX, id uuid.UUID) ([]Repair, error) {
	rows, err := db.Query(ctx, `
		SELECT step_key, attempt, response_id::text, repaired_at FROM rflow.run_repairs
		WHERE run_id = $1 ORDER BY repaired_at, step_key`, id)
	if err != nil {
		return nil, fmt.Errorf("repairs of run %s: %w", id, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Repair, error) {
		var x Repair
		err := r.Scan(&x.StepKey, &x.Attempt, &x.Response, &x.RepairedAt)
		return x, err
	})
}
