package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/trigger"
)

// pruneFixture claims one run per (workflow, status, age) and gives each a
// journal row and a River job, as the engine would have left them.
type pruneFixture struct {
	pool *pgxpool.Pool
	ids  map[string]uuid.UUID // by "workflow/status/age"
}

func newPruneFixture(t *testing.T) *pruneFixture {
	t.Helper()
	ctx := context.Background()
	f := &pruneFixture{pool: storetest.Pool(t), ids: map[string]uuid.UUID{}}
	for _, wf := range []string{"a", "b"} {
		_, err := f.pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ($1, 'h', '{}', 1)`, wf)
		require.NoError(t, err)
	}
	return f
}

// add claims a run of wf, sets its status and, for a finished one, when it
// finished (age ago).
func (f *pruneFixture) add(t *testing.T, wf, kind, key string, status store.RunStatus, age time.Duration, jobState string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var won []store.ClaimedRun
	require.NoError(t, pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		var err error
		won, err = store.ClaimRuns(ctx, tx, []store.Claim{{Workflow: wf, TriggerKey: key, TriggerKind: trigger.Kind(kind)}})
		return err
	}))
	require.Len(t, won, 1)
	id := won[0].ID
	_, err := f.pool.Exec(ctx, `
		UPDATE rflow.workflow_runs SET status = $2,
			finished_at = CASE WHEN $2 IN ('completed', 'failed', 'cancelled') THEN now() - $3::interval END
		WHERE id = $1`, id, status, fmt.Sprintf("%d seconds", int(age.Seconds())))
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO rflow.step_runs (run_id, step_key, step_id, kind, status) VALUES ($1, 's', 's', 'noop', 'completed')`, id)
	require.NoError(t, err)
	if jobState != "" {
		// The step's first attempt, and a later one that completed.
		f.job(t, id, "rflow.step.first", jobState)
		f.job(t, id, "rflow.step", "completed")
	}
	f.ids[fmt.Sprintf("%s/%s/%s", wf, status, key)] = id
	return id
}

// job inserts a River job of run id in state, with the args of a
// step job of that kind: rflow.step names the run by its key run_id,
// rflow.step.first by the first element of [run id, "step/generation"].
func (f *pruneFixture) job(t *testing.T, id uuid.UUID, kind, state string) {
	t.Helper()
	args := `jsonb_build_object('run_id', $1::uuid, 'step_key', 's', 'generation', 1, 'run_attempt', 1, 'attempt', 2)`
	if kind == "rflow.step.first" {
		args = `jsonb_build_array($1::text, 's/1')`
	}
	_, err := f.pool.Exec(context.Background(), `
		INSERT INTO river.river_job (kind, args, state, max_attempts, queue, attempted_at, finalized_at)
		VALUES ($3, `+args+`, $2::river.river_job_state, 5, 'default', now(),
			CASE WHEN $2 IN ('completed', 'cancelled', 'discarded') THEN now() END)`, id, state, kind)
	require.NoError(t, err)
}

func (f *pruneFixture) exists(t *testing.T, id uuid.UUID) bool {
	t.Helper()
	var runs, steps, jobs int
	require.NoError(t, f.pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM rflow.workflow_runs WHERE id = $1),
		       (SELECT count(*) FROM rflow.step_runs WHERE run_id = $1),
		       (SELECT count(*) FROM river.river_job WHERE args->>'run_id' = $1::text OR args->>0 = $1::text)`, id).Scan(&runs, &steps, &jobs))
	if runs == 0 {
		require.Zero(t, steps, "the journal of pruned run %s is left", id)
		require.Zero(t, jobs, "River jobs of pruned run %s are left", id)
	}
	return runs == 1
}

// Retention deletes old completed and cancelled runs with their journal
// and River jobs, in bounded batches; it never touches a failed run unless
// asked, an unfinished run at all, a run a job is still working, a recent
// run, or the newest tick of a cron workflow.
func TestPruneRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newPruneFixture(t)
	const old, recent = 40 * 24 * time.Hour, time.Hour
	var oldDone []uuid.UUID
	for i := range 7 {
		oldDone = append(oldDone, f.add(t, "a", "manual", fmt.Sprintf("done%d", i), store.RunCompleted, old, "completed"))
	}
	oldCancelled := f.add(t, "a", "manual", "cancelled", store.RunCancelled, old, "available")
	oldFailed := f.add(t, "a", "manual", "failed", store.RunFailed, old, "")
	recentDone := f.add(t, "a", "manual", "recent", store.RunCompleted, recent, "")
	parked := f.add(t, "a", "manual", "parked", store.RunWaitingDelay, 0, "scheduled")
	queued := f.add(t, "a", "manual", "queued", store.RunQueued, 0, "")
	working := f.add(t, "a", "manual", "working", store.RunCompleted, old, "running")
	retrying := f.add(t, "a", "manual", "retrying", store.RunCompleted, old, "")
	f.job(t, retrying, "rflow.step", "running")
	otherWf := f.add(t, "b", "manual", "b-done", store.RunCompleted, old, "")
	cronOld := f.add(t, "b", "cron", "2026-10-01T00:00:00Z", store.RunCompleted, old, "")
	cronNewest := f.add(t, "b", "cron", "2026-10-02T00:00:00Z", store.RunCompleted, old, "")

	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	_, err := store.CountPrunable(ctx, f.pool, store.PruneFilter{FinishedBefore: cutoff, Statuses: []store.RunStatus{store.RunRunning}})
	require.ErrorContains(t, err, "never pruned")

	// One workflow only, and a dry run first.
	fa := store.PruneFilter{FinishedBefore: cutoff, Statuses: []store.RunStatus{store.RunCompleted, store.RunCancelled}, Workflow: "a", Batch: 3}
	n, err := store.CountPrunable(ctx, f.pool, fa)
	require.NoError(t, err)
	require.EqualValues(t, 8, n, "7 completed + 1 cancelled")
	require.True(t, f.exists(t, oldDone[0]), "a dry run deleted")

	n, err = store.PruneRuns(ctx, f.pool, fa)
	require.NoError(t, err)
	require.EqualValues(t, 8, n, "batches of 3 until a partial batch")
	for _, id := range append(oldDone, oldCancelled) {
		require.False(t, f.exists(t, id))
	}
	for name, id := range map[string]uuid.UUID{"failed": oldFailed, "recent": recentDone, "parked": parked,
		"queued": queued, "a first-step job still works it": working, "a step job still works it": retrying, "other workflow": otherWf, "cron": cronOld, "newest cron tick": cronNewest} {
		require.True(t, f.exists(t, id), "pruned the %s run", name)
	}

	// Every workflow: the old cron tick goes, the newest stays.
	n, err = store.PruneRuns(ctx, f.pool, store.PruneFilter{FinishedBefore: cutoff, Statuses: []store.RunStatus{store.RunCompleted}})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.False(t, f.exists(t, otherWf))
	require.False(t, f.exists(t, cronOld))
	require.True(t, f.exists(t, cronNewest))
	require.True(t, f.exists(t, working))
	require.True(t, f.exists(t, retrying))

	// The DLQ only when asked for.
	n, err = store.PruneRuns(ctx, f.pool, store.PruneFilter{FinishedBefore: cutoff, Statuses: []store.RunStatus{store.RunFailed}})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.False(t, f.exists(t, oldFailed))
}

// A run another transaction holds (a retry deciding, say) is skipped, not
// waited for, and pruned on a later pass.
func TestPruneSkipsLockedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newPruneFixture(t)
	held := f.add(t, "a", "manual", "held", store.RunCompleted, 40*24*time.Hour, "")
	free := f.add(t, "a", "manual", "free", store.RunCompleted, 40*24*time.Hour, "")
	tx, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = store.GetRun(ctx, tx, held, true)
	require.NoError(t, err)

	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fl := store.PruneFilter{FinishedBefore: time.Now().Add(-24 * time.Hour), Statuses: []store.RunStatus{store.RunCompleted}}
	n, err := store.PruneRuns(pctx, f.pool, fl)
	require.NoError(t, err, "prune waited on a locked run")
	require.EqualValues(t, 1, n)
	require.False(t, f.exists(t, free))
	require.True(t, f.exists(t, held))

	require.NoError(t, tx.Rollback(ctx))
	n, err = store.PruneRuns(ctx, f.pool, fl)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.False(t, f.exists(t, held))
}

// The operator views answer what docs/operations.md says they do.
func TestOperatorViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newPruneFixture(t)
	f.add(t, "a", "manual", "done", store.RunCompleted, time.Hour, "")
	f.add(t, "a", "manual", "failed", store.RunFailed, time.Hour, "")
	stuck := f.add(t, "a", "manual", "stuck", store.RunRunning, 0, "")
	sleeping := f.add(t, "a", "manual", "sleeping", store.RunWaitingDelay, 0, "")
	overdue := f.add(t, "a", "manual", "overdue", store.RunWaitingDelay, 0, "")
	fresh := f.add(t, "b", "manual", "fresh", store.RunRunning, 0, "")
	_, err := f.pool.Exec(ctx, `UPDATE rflow.workflow_runs SET updated_at = now() - interval '1 hour', position = 's' WHERE id = ANY($1)`,
		[]uuid.UUID{stuck, sleeping, overdue})
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE rflow.workflow_runs SET wake_at = now() + interval '1 hour' WHERE id = $1`, sleeping)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE rflow.workflow_runs SET wake_at = now() - interval '5 minutes' WHERE id = $1`, overdue)
	require.NoError(t, err)

	var runs, completed, failed, running, waiting int
	require.NoError(t, f.pool.QueryRow(ctx, `
		SELECT runs, completed, failed, running, waiting FROM rflow.run_summary WHERE workflow_name = 'a'`).
		Scan(&runs, &completed, &failed, &running, &waiting))
	require.Equal(t, []int{5, 1, 1, 1, 2}, []int{runs, completed, failed, running, waiting})

	rows, err := f.pool.Query(ctx, `SELECT id FROM rflow.stuck_runs ORDER BY updated_at`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{stuck, overdue}, ids, "sleeping and fresh runs are not stuck")
	require.NotContains(t, ids, fresh)
	var stepStatus string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT step_status FROM rflow.stuck_runs WHERE id = $1`, stuck).Scan(&stepStatus))
	require.Equal(t, "completed", stepStatus)

	_, err = f.pool.Exec(ctx, `
		INSERT INTO indexer.blocks (chain_id, number, hash, parent_hash) VALUES (1, 100, 'h100', 'h99'), (1, 120, 'h120', 'h119');
		INSERT INTO indexer.cursors (task, phase, chain_id, block, updated_at) VALUES ('event/a', 'confirmed', 1, 95, now() - interval '2 minutes');
		INSERT INTO rflow.leases (name, owner, token, expires_at) VALUES ('proj/event/a', 'node-1', 3, now() + interval '30 seconds')`)
	require.NoError(t, err)
	var behind int64
	var since time.Duration
	var owner string
	var live bool
	require.NoError(t, f.pool.QueryRow(ctx, `
		SELECT blocks_behind, since_advance, lease_owner, lease_live FROM rflow.trigger_lag WHERE task = 'event/a'`).
		Scan(&behind, &since, &owner, &live))
	require.EqualValues(t, 25, behind)
	require.Greater(t, since, time.Minute)
	require.Equal(t, "node-1", owner)
	require.True(t, live)
}
