package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RehearsalPruneFilter selects the rehearsals PruneRehearsals deletes.
type RehearsalPruneFilter struct {
	// Kind and Session select one session (both set), or every session of
	// a kind (Session empty). Kind empty: every rehearsal of every kind.
	Kind    RehearsalKind
	Session string
	// Batch is how many rows one transaction deletes (default 500).
	Batch int
	// Namespace is the project whose rehearsals are pruned (those of its
	// workflows); another project's sessions are left alone.
	Namespace Namespace
}

// RehearsalPruned is what PruneRehearsals deleted.
type RehearsalPruned struct {
	Workflows int   `json:"workflows"`
	Runs      int64 `json:"runs"`
	Jobs      int64 `json:"jobs"`
	// Sends are the dry-run (simulated) relayer rows of the rehearsals'
	// sends; a rehearsal's real transactions stay in the relayer's history.
	Sends int64 `json:"simulated_sends"`
	// Busy are runs left because a River job is working them right now (a
	// replay still running) or because a test session is running; a later
	// prune takes them.
	Busy int64 `json:"busy_runs"`
	// Schemas are River schemas of test sessions that ended without
	// dropping theirs (a killed `rflow test`).
	Schemas int `json:"river_schemas"`
}

// RehearsalWorkflows lists the deployed rehearsal workflows f selects.
// Only names of the rehearsal shape are ever returned, so nothing built
// on this list can reach a live workflow.
func RehearsalWorkflows(ctx context.Context, db DBTX, f RehearsalPruneFilter) ([]Rehearsal, error) {
	rows, err := db.Query(ctx, `SELECT name FROM rflow.workflows WHERE name ~ `+rehearsalSQL+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list rehearsals: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list rehearsals: %w", err)
	}
	var out []Rehearsal
	for _, n := range names {
		r, ok := ParseRehearsal(n)
		if !ok || (f.Kind != "" && r.Kind != f.Kind) || (f.Session != "" && r.Session != f.Session) || !f.Namespace.Owns(r.Workflow) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// PruneRehearsals deletes the rows of the rehearsals f selects: their runs
// (with the step journal and everything else that references a run, by
// cascade), the River jobs of their queues, their simulated relayer rows,
// budgets, reservations and guard windows, and finally the rehearsal
// workflow itself. Every statement is bounded by f.Batch rows and keyed by
// a rehearsal workflow name (or its queue), so it can never delete a live
// workflow's row. Rows another transaction holds are skipped (FOR UPDATE
// SKIP LOCKED), and a run whose job is running is left for a later prune.
//
// A sweep of test sessions (Kind test or empty, no Session) also drops the
// River schemas killed sessions left, and touches no test row while any
// `rflow test` is running (HoldTestSession): their runs count as Busy.
// A named session is the caller's to know finished.
func PruneRehearsals(ctx context.Context, pool *pgxpool.Pool, f RehearsalPruneFilter) (RehearsalPruned, error) {
	if f.Session != "" {
		if err := ValidSession(f.Session); err != nil {
			return RehearsalPruned{}, err
		}
	}
	if f.Batch <= 0 {
		f.Batch = DefaultPruneBatch
	}
	var out RehearsalPruned
	list, err := RehearsalWorkflows(ctx, pool, f)
	if err != nil {
		return out, err
	}
	var sweep *pgxpool.Conn // the test sessions' lock, when no session runs
	sweeping := f.Session == "" && (f.Kind == "" || f.Kind == RehearsalTest)
	if sweeping {
		if sweep, err = sweepTests(ctx, pool); err != nil {
			return out, fmt.Errorf("test session lock: %w", err)
		}
		if sweep != nil {
			defer endSweep(sweep)
		}
	}
	for _, r := range list {
		if sweeping && sweep == nil && r.Kind == RehearsalTest {
			// A test session is running: this may be one of its tests.
			var n int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, r.Name()).Scan(&n); err != nil {
				return out, fmt.Errorf("count runs of %s: %w", r.Name(), err)
			}
			out.Busy += n
			continue
		}
		if err := pruneRehearsal(ctx, pool, r, f.Batch, &out); err != nil {
			return out, fmt.Errorf("prune %s: %w", r.Name(), err)
		}
	}
	if sweep != nil {
		n, err := dropRehearsalSchemas(ctx, pool)
		out.Schemas += n
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func pruneRehearsal(ctx context.Context, pool *pgxpool.Pool, r Rehearsal, batch int, out *RehearsalPruned) error {
	name := r.Name()
	if !IsRehearsal(name) { // defence in depth: the shape is the guarantee
		return fmt.Errorf("%s is not a rehearsal", name)
	}
	// Runs first (not ones a job is working), with their journal (no
	// foreign key cascades to it) and their simulated sends.
	for {
		var runs, sends int64
		err := pool.QueryRow(ctx, `
			WITH victims AS (
				SELECT r.id FROM rflow.workflow_runs r
				WHERE r.workflow_name = $1
				  AND NOT EXISTS (SELECT 1 FROM river.river_job j
				                  WHERE j.queue = $2 AND j.state = 'running' AND `+jobOfRun+`)
				LIMIT $3
				FOR UPDATE OF r SKIP LOCKED
			), sends AS (
				DELETE FROM relayer.transactions t
				USING (SELECT format('rflow:%s:%s:%s', s.run_id, s.step_key, g) AS external_id
				       FROM rflow.step_runs s JOIN victims v ON v.id = s.run_id, generate_series(1, s.attempt) g
				       WHERE s.kind = 'send') k
				WHERE t.external_id = k.external_id AND t.dry_run AND t.status = 'simulated'
				RETURNING 1
			), steps AS (
				DELETE FROM rflow.step_runs s USING victims v WHERE s.run_id = v.id
			), runs AS (
				DELETE FROM rflow.workflow_runs r USING victims v WHERE r.id = v.id RETURNING 1
			)
			SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM sends)`, name, r.Queue(), batch).Scan(&runs, &sends)
		if err != nil {
			return fmt.Errorf("runs: %w", err)
		}
		out.Runs += runs
		out.Sends += sends
		if runs < int64(batch) || ctx.Err() != nil {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The queue's jobs: only rehearsal queues ever hold this name.
	n, err := deleteBatched(ctx, pool, batch, `
		DELETE FROM river.river_job WHERE id IN (
			SELECT id FROM river.river_job WHERE queue = $1 AND state <> 'running' LIMIT $2 FOR UPDATE SKIP LOCKED)`, r.Queue())
	out.Jobs += n
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if _, err := deleteBatched(ctx, pool, batch, `
		DELETE FROM rflow.budget_reservations WHERE ctid IN (
			SELECT ctid FROM rflow.budget_reservations WHERE workflow_name = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, name); err != nil {
		return fmt.Errorf("budget reservations: %w", err)
	}
	if _, err := deleteBatched(ctx, pool, batch, `
		DELETE FROM rflow.rate_limit_buckets WHERE ctid IN (
			SELECT ctid FROM rflow.rate_limit_buckets WHERE workflow = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, name); err != nil {
		return fmt.Errorf("guard windows: %w", err)
	}
	var busy int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, name).Scan(&busy); err != nil {
		return fmt.Errorf("count runs left: %w", err)
	}
	out.Busy += busy
	if busy > 0 {
		return nil // the workflow stays until its last run goes
	}
	// A few rows (budgets declared, generations): one statement.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM rflow.budgets WHERE workflow_name = $1`, name); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			DELETE FROM rflow.workflows w WHERE w.name = $1
			  AND NOT EXISTS (SELECT 1 FROM rflow.workflow_runs r WHERE r.workflow_name = w.name)`, name)
		if err == nil && tag.RowsAffected() == 1 {
			out.Workflows++
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("workflow: %w", err)
	}
	return nil
}

// deleteBatched repeats a DELETE taking (arg, limit) until it deletes
// fewer than batch rows, and returns how many it deleted.
func deleteBatched(ctx context.Context, pool *pgxpool.Pool, batch int, q string, arg any) (int64, error) {
	var total int64
	for {
		tag, err := pool.Exec(ctx, strings.TrimSpace(q), arg, batch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}
