package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// deleteJobs deletes every River job of run id, as an operator deleting
// them in River UI would (or a restore that lost them), in tx or in db.
func deleteJobs(t *testing.T, db store.DBTX, id uuid.UUID) int64 {
	t.Helper()
	tag, err := db.Exec(context.Background(), `DELETE FROM river.river_job
		WHERE args @> jsonb_build_object('run_id', $1::uuid) OR args ? $1::text`, id)
	require.NoError(t, err)
	return tag.RowsAffected()
}

func jobsOf(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM river.river_job
		WHERE state <> 'completed' AND (args @> jsonb_build_object('run_id', $1::uuid) OR args ? $1::text)`, id).Scan(&n))
	return n
}

// A run parked on a delay whose scheduled job was deleted wakes all the
// same: the repair enqueues the step at its wake time, once, whoever scans.
func TestRepairReenqueuesADeletedDelayJob(t *testing.T) {
	t.Parallel()
	b := setup(t, delayed)
	id := b.manual(t, "later", "d1", nil)
	ctx := context.Background()
	parked, err := store.GetRun(ctx, b.pool, id, false)
	require.NoError(t, err)
	require.NotNil(t, parked.WakeAt)

	n, err := b.engine.RepairRuns(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a run with its job is not repaired")

	require.Equal(t, int64(1), deleteJobs(t, b.pool, id))
	n, err = b.engine.RepairRuns(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, jobsOf(t, b.pool, id))
	n, err = b.engine.RepairRuns(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a second scan finds the repaired step's job")

	done := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, done.Status)
	require.Len(t, b.recv.got("/ping"), 1)
	require.False(t, b.recv.got("/ping")[0].Arrived.Before(*parked.WakeAt), "the delay was kept, not cut short")
	repairs, err := store.RunRepairs(ctx, b.pool, id)
	require.NoError(t, err)
	require.Len(t, repairs, 1)
	require.Equal(t, "wait", repairs[0].StepKey)
	require.Equal(t, 1, repairs[0].Attempt)
}

// A queued first step whose job vanished (deleted in the claim's own
// transaction here, so no worker can take it first) runs once after the
// repair; two repairers racing enqueue one job.
func TestRepairReenqueuesALostFirstStepOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, threeSteps)
	ctx := context.Background()
	var id uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		id, _, err = b.engine.StartRunTx(ctx, tx, store.Claim{Workflow: "three", TriggerKey: "k1", TriggerKind: "manual", Trigger: []byte(`{"input":{}}`)})
		require.NoError(t, err)
		require.Equal(t, int64(1), deleteJobs(t, tx, id))
		return nil
	}))
	time.Sleep(300 * time.Millisecond)
	run, err := store.GetRun(ctx, b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, run.Status, "nothing runs a step without a job")
	require.Empty(t, b.recv.got("/a"))

	results := make(chan int, 2)
	for range 2 {
		go func() {
			n, err := b.engine.RepairRuns(ctx)
			require.NoError(t, err)
			results <- n
		}()
	}
	require.Equal(t, 1, <-results+<-results, "one of two racing scans repairs the step")

	done := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, done.Status)
	require.Len(t, b.recv.got("/a"), 1, "the step ran once")
	require.Len(t, b.recv.got("/c"), 1)
}

// A send waiting on its transaction and a step held for a reorg response
// have no job by design: the scan leaves them alone. (A held step is set
// up by hand here: queued, held_at set, no job.)
func TestRepairLeavesHeldStepsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, delayed)
	ctx := context.Background()
	id := b.manual(t, "later", "h1", nil)
	_, err := b.pool.Exec(ctx, `UPDATE rflow.step_runs SET held_at = now() WHERE run_id = $1`, id)
	require.NoError(t, err)
	deleteJobs(t, b.pool, id)
	n, err := b.engine.RepairRuns(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}
