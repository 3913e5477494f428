package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PruneFilter selects the runs retention deletes.
type PruneFilter struct {
	// FinishedBefore: only runs that finished before this instant.
	FinishedBefore time.Time
	// Statuses are the terminal statuses to delete: RunCompleted,
	// RunCancelled and, only when asked for, RunFailed (the DLQ). Any other
	// status is refused.
	Statuses []RunStatus
	// Workflow, when set, limits pruning to one workflow (a local name of
	// Namespace's).
	Workflow string
	// Namespace is the project whose runs (and rehearsals' runs) are
	// pruned: never another project's.
	Namespace Namespace
	// Batch is how many runs one transaction deletes (default 500).
	Batch int
}

// DefaultPruneBatch bounds each prune transaction.
const DefaultPruneBatch = 500

// Validate refuses a filter that could delete unfinished work.
func (f *PruneFilter) Validate() error {
	if f.FinishedBefore.IsZero() {
		return fmt.Errorf("prune: a finished-before time is required")
	}
	if len(f.Statuses) == 0 {
		return fmt.Errorf("prune: at least one status is required")
	}
	for _, s := range f.Statuses {
		if !s.Terminal() {
			return fmt.Errorf("prune: %q is not a terminal run status (completed, cancelled or failed); unfinished runs are never pruned", s)
		}
	}
	if f.Batch <= 0 {
		f.Batch = DefaultPruneBatch
	}
	return nil
}

func (f *PruneFilter) statusText() []string {
	out := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		out[i] = string(s)
	}
	return out
}

// jobOfRun says that River job j works a step of run r: a rflow.step
// job names its run by the key run_id, a rflow.step.first job by its
// first element ([run id, "step/generation"], jobs.FirstStepArgs). Both
// are lookups in River's GIN index on args.
const jobOfRun = `(j.args @> jsonb_build_object('run_id', r.id) OR j.args ? r.id::text)`

// prunable is the predicate shared by PruneRuns and CountPrunable. Besides
// the filter it keeps two kinds of runs:
//   - a run a River job is still working (it is pruned on a later pass);
//   - the newest tick of each cron workflow, from which a restart with
//     catch_up resumes its schedule.
func (f *PruneFilter) prunable() string {
	return `
	FROM rflow.workflow_runs r
	WHERE r.status = ANY($1) AND r.finished_at < $2 AND ($3 = '' OR r.workflow_name = $3)
	  AND ` + f.Namespace.filterWithRehearsals("r.workflow_name") + `
	  AND NOT EXISTS (SELECT 1 FROM river.river_job j
	                  WHERE ` + jobOfRun + ` AND j.state = 'running')
	  AND NOT (r.trigger_kind = 'cron' AND r.trigger_key = (
	      SELECT max(c.trigger_key) FROM rflow.workflow_runs c
	      WHERE c.workflow_name = r.workflow_name AND c.trigger_kind = 'cron'))`
}

// workflow is the stored name of f.Workflow ("" for every workflow).
func (f *PruneFilter) workflow() string {
	if f.Workflow == "" || IsRehearsal(f.Workflow) {
		return f.Workflow
	}
	return f.Namespace.Qualify(f.Workflow)
}

// PruneRuns deletes the runs f selects, with their step journal (and
// whatever else references them by cascade) and the River job rows left
// of them, in transactions of at most f.Batch runs. Rows another
// transaction holds (a retry, a cancel, another pruner) are skipped with
// FOR UPDATE SKIP LOCKED, so pruning never waits on the engine. It stops
// after the first partial batch and returns how many runs it deleted.
//
// A pruned run leaves a tombstone of its (workflow, trigger key) in
// rflow.run_tombstones, written in the same statement, which the claim
// gate honours: an occurrence delivered again after its run was pruned
// claims nothing.
func PruneRuns(ctx context.Context, pool *pgxpool.Pool, f PruneFilter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	var total int64
	for {
		var n int64
		err := pool.QueryRow(ctx, `
			WITH victims AS (
				SELECT r.id, r.workflow_name, r.trigger_key `+f.prunable()+`
				ORDER BY r.finished_at
				LIMIT $4
				FOR UPDATE OF r SKIP LOCKED
			), tombs AS (
				INSERT INTO rflow.run_tombstones (workflow_name, trigger_key, run_id)
				SELECT workflow_name, trigger_key, id FROM victims
				ON CONFLICT (workflow_name, trigger_key) DO NOTHING
			), jobs AS (
				DELETE FROM river.river_job j USING victims r
				WHERE `+jobOfRun+` AND j.state <> 'running'
			), steps AS (
				DELETE FROM rflow.step_runs s USING victims v WHERE s.run_id = v.id
			), runs AS (
				DELETE FROM rflow.workflow_runs r USING victims v WHERE r.id = v.id RETURNING 1
			)
			SELECT count(*) FROM runs`, f.statusText(), f.FinishedBefore, f.workflow(), f.Batch).Scan(&n)
		if err != nil {
			return total, fmt.Errorf("prune runs: %w", err)
		}
		total += n
		if n < int64(f.Batch) || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// CountPrunable is what PruneRuns would delete now (its dry run).
func CountPrunable(ctx context.Context, db DBTX, f PruneFilter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	var n int64
	err := db.QueryRow(ctx, `SELECT count(*) `+f.prunable(), f.statusText(), f.FinishedBefore, f.workflow()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count prunable runs: %w", err)
	}
	return n, nil
}

// PrunedError is a claim for an occurrence whose run was pruned: the
// tombstone kept its key, so nothing new starts.
type PrunedError struct {
	Workflow, Key string
	RunID         uuid.UUID
	PrunedAt      time.Time
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("key %s of %s already had run %s, pruned at %s: nothing new started",
		e.Key, e.Workflow, e.RunID, e.PrunedAt.UTC().Format(time.RFC3339))
}

// Tombstone returns the tombstone of (workflow, key) as a *PrunedError, or
// nil when the key has none.
func Tombstone(ctx context.Context, db DBTX, workflow, key string) (*PrunedError, error) {
	e := &PrunedError{Workflow: workflow, Key: key}
	err := db.QueryRow(ctx, `SELECT run_id, pruned_at FROM rflow.run_tombstones WHERE workflow_name = $1 AND trigger_key = $2`,
		workflow, key).Scan(&e.RunID, &e.PrunedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tombstone of %s %s: %w", workflow, key, err)
	}
	return e, nil
}
