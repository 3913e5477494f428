package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

const delayFirstProject = `
name: t
workflows:
  - name: g
    trigger: { manual: {} }
    %s
    steps:
      - id: nap
        delay: 1h
      - id: a
        http_call: { method: POST, url: "{{URL}}/a" }
`

// claimCounting claims n manual runs of g in one transaction, as
// claimAll does, and returns their ids and how many run rows the claim
// transaction updated (the transaction's own statistics).
func (b *testBundle) claimCounting(t *testing.T, prefix string, n int) ([]uuid.UUID, int64) {
	t.Helper()
	ctx := context.Background()
	claims := make([]store.Claim, n)
	for i := range claims {
		claims[i] = store.ManualClaim("g", fmt.Sprintf("%s%03d", prefix, i), nil)
	}
	var updated int64
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		const q = `SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE schemaname = 'rflow' AND relname = 'workflow_runs'`
		var before int64
		if err := tx.QueryRow(ctx, q).Scan(&before); err != nil {
			return err
		}
		if _, err := b.engine.ClaimTx(ctx, tx, claims); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, q).Scan(&updated)
		updated -= before
		return err
	}))
	ids := make([]uuid.UUID, n)
	for i, c := range claims {
		id, _, err := store.RunByKey(ctx, b.pool, "g", c.TriggerKey, c.Trigger)
		require.NoError(t, err)
		ids[i] = id
	}
	return ids, updated
}

// A run whose first step is a delay is born parked by the claim's INSERT:
// its row says waiting_delay at the delay's wake time and position, its
// journal holds the delay waiting until then and its job is scheduled
// then, and the claim wrote no second version of any run row.
func TestDelayFirstRunIsBornParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fmt.Sprintf(delayFirstProject, ""))
	b.claimCounting(t, "warm", 1) // the engine learns the generation claims pin
	before := time.Now()
	ids, updated := b.claimCounting(t, "k", 20)
	after := time.Now()
	require.Zero(t, updated, "no run row is rewritten after its insert")
	for _, id := range ids {
		var status, position string
		var wake, stepWake, jobAt time.Time
		var stepStatus string
		require.NoError(t, b.pool.QueryRow(ctx, `
			SELECT r.status, r.position, r.wake_at, s.status, s.wake_at, j.scheduled_at
			FROM rflow.workflow_runs r
			JOIN rflow.step_runs s ON s.run_id = r.id
			JOIN river.river_job j ON j.args ? r.id::text
			WHERE r.id = $1`, id).Scan(&status, &position, &wake, &stepStatus, &stepWake, &jobAt))
		require.Equal(t, string(store.RunWaitingDelay), status, "run %s", id)
		require.Equal(t, "nap", position)
		require.WithinRange(t, wake, before.Add(time.Hour-time.Second), after.Add(time.Hour+time.Second))
		require.Equal(t, string(store.StepWaiting), stepStatus)
		require.True(t, stepWake.Equal(wake), "the journal's wake %v is the run's %v", stepWake, wake)
		require.True(t, jobAt.Equal(wake), "the job is scheduled at the wake %v, not %v", wake, jobAt)
		var steps int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rflow.step_runs WHERE run_id = $1`, id).Scan(&steps))
		require.Equal(t, 1, steps, "only the delay is journaled")
	}
}

// A paused workflow's delay-first claims are not born parked: they wait
// queued with no job for the resume, which parks them then.
func TestDelayFirstRunOfPausedWorkflowWaitsQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fmt.Sprintf(delayFirstProject, ""))
	b.claimCounting(t, "warm", 1)
	require.NoError(t, store.SetWorkflowPaused(ctx, b.pool, "g", true))
	ids, _ := b.claimCounting(t, "k", 5)
	for _, id := range ids {
		require.Equal(t, store.RunQueued, b.status(t, id))
		var steps int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rflow.step_runs WHERE run_id = $1`, id).Scan(&steps))
		require.Zero(t, steps)
	}
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		n, err := b.engine.ResumeWorkflowTx(ctx, tx, "g")
		require.Equal(t, 5, n)
		return err
	}))
	for _, id := range ids {
		require.Equal(t, store.RunWaitingDelay, b.status(t, id))
	}
}

// A guarded workflow whose first step is a delay still holds what its
// guard refuses: only the admitted runs park, the rest are throttled,
// whether or not the engine already knows the generation.
func TestDelayFirstGuardedRunsAreHeld(t *testing.T) {
	t.Parallel()
	for _, guard := range []string{"concurrency: { max: 2 }", "throttle: { max: 2, per: 1h }"} {
		t.Run(guard, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fmt.Sprintf(delayFirstProject, guard))
			count := func(ids []uuid.UUID) map[store.RunStatus]int {
				n := map[store.RunStatus]int{}
				for _, id := range ids {
					n[b.status(t, id)]++
				}
				return n
			}
			first, _ := b.claimCounting(t, "a", 4)
			require.Equal(t, map[store.RunStatus]int{store.RunWaitingDelay: 2, store.RunThrottled: 2}, count(first))
			second, _ := b.claimCounting(t, "b", 4)
			require.Equal(t, map[store.RunStatus]int{store.RunThrottled: 4}, count(second), "the guard holds every later claim")
		})
	}
}
