package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

const guardedProject = `
name: t
workflows:
  - name: g
    trigger: { manual: {} }
    %s
    steps:
      - id: a
        http_call: { method: POST, url: "{{URL}}/a", body: { run: "${{ run.id }}" } }
`

func (b *testBundle) status(t *testing.T, id uuid.UUID) store.RunStatus {
	t.Helper()
	run, err := store.GetRun(context.Background(), b.pool, id, false)
	require.NoError(t, err)
	return run.Status
}

// claimAll claims n manual runs of g in one transaction, in key order.
func (b *testBundle) claimAll(t *testing.T, prefix string, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	claims := make([]store.Claim, n)
	for i := range claims {
		claims[i] = store.ManualClaim("g", fmt.Sprintf("%s%03d", prefix, i), nil)
	}
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.engine.ClaimTx(ctx, tx, claims)
		return err
	}))
	ids := make([]uuid.UUID, n)
	for i, c := range claims {
		id, _, err := store.RunByKey(ctx, b.pool, "g", c.TriggerKey, c.Trigger)
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

// firstStepAt returns when each run's first step was enqueued: when its
// guard admitted it.
func (b *testBundle) firstStepAt(t *testing.T, ids []uuid.UUID) []time.Time {
	t.Helper()
	out := make([]time.Time, len(ids))
	for i, id := range ids {
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT created_at FROM rflow.step_runs WHERE run_id = $1 AND step_key = 'a'`, id).Scan(&out[i]))
	}
	return out
}

func TestThrottleHoldsExcessClaimsAndStartsThemInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, fmt.Sprintf(guardedProject, "throttle: { max: 2, per: 1s }"))
	ids := b.claimAll(t, "k", 6)
	held := 0
	for _, id := range ids {
		if b.status(t, id) == store.RunThrottled {
			held++
		}
	}
	// The claim may straddle a window boundary, which admits two more.
	require.GreaterOrEqual(t, held, 2, "claims over the throttle are recorded as throttled runs")
	for _, id := range ids {
		require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status, "no throttled claim vanishes")
	}
	at := b.firstStepAt(t, ids)
	perWindow := map[int64]int{}
	for i, ts := range at {
		if i > 0 {
			require.False(t, ts.Before(at[i-1]), "run %d started before run %d, which was claimed first", i, i-1)
		}
		perWindow[ts.Unix()]++
	}
	for w, n := range perWindow {
		require.LessOrEqual(t, n, 2, "window %d started %d runs, more than max 2", w, n)
	}
	require.Len(t, b.recv.got("/a"), 6)
}

func TestDurableRateLimitRacingRunsAdmitAtMostMax(t *testing.T) {
	t.Parallel()
	b := setup(t, fmt.Sprintf(guardedProject, "rate_limit: { max: 3, per: 1h, durable: true }"))
	waitPastBoundary(t, time.Hour, 20*time.Second)
	const n = 20
	ids := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = b.manual(t, "g", fmt.Sprintf("r%02d", i), nil)
		}()
	}
	wg.Wait()
	started := 0
	for _, id := range ids {
		switch st := b.status(t, id); st {
		case store.RunThrottled:
			run, err := store.GetRun(context.Background(), b.pool, id, false)
			require.NoError(t, err)
			require.NotNil(t, run.WakeAt, "a rate-limited run says until when")
			require.True(t, run.WakeAt.After(time.Now()))
		default:
			started++
		}
	}
	require.Equal(t, 3, started, "racing runs admit exactly max in one window")
	var count int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count FROM rflow.rate_limit_buckets WHERE workflow = 'g' AND guard = 'rate_limit'`).Scan(&count))
	require.Equal(t, 3, count)
	// The held runs stay held past a release tick: the window is full.
	time.Sleep(700 * time.Millisecond)
	throttled, err := store.ListRuns(context.Background(), b.pool, store.RunFilter{Workflow: "g", Status: store.RunThrottled, Limit: 100})
	require.NoError(t, err)
	require.Len(t, throttled, n-3)
}

func TestInProcessRateLimitWaitsForTheNextWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, fmt.Sprintf(guardedProject, "rate_limit: { max: 1, per: 1s }"))
	ids := b.claimAll(t, "p", 3)
	for _, id := range ids {
		require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status, "a rate-limited run is never dropped or failed")
	}
	at := b.firstStepAt(t, ids)
	for i := 1; i < len(at); i++ {
		require.NotEqual(t, at[i-1].Unix(), at[i].Unix(), "two runs started in one 1s window under max 1")
	}
	var buckets int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM rflow.rate_limit_buckets`).Scan(&buckets))
	require.Zero(t, buckets, "a rate_limit without durable keeps its window in process")
}

// waitPastBoundary sleeps past the next multiple of per (Unix-aligned) when
// it is less than margin away, so a test's window cannot roll over.
func waitPastBoundary(t *testing.T, per, margin time.Duration) {
	t.Helper()
	next := time.Now().Truncate(per).Add(per)
	if d := time.Until(next); d < margin {
		time.Sleep(d + time.Second)
	}
}

func TestConcurrencyKeyLimitsInFlightRunsPerKey(t *testing.T) {
	t.Parallel()
	b := setup(t, `
name: t
workflows:
  - name: g
    trigger: { manual: {} }
    concurrency: { max: 1, key: "${{ trigger.input.who }}" }
    steps:
      - id: a
        http_call: { method: POST, url: "{{URL}}/a", body: { run: "${{ run.id }}" } }
      - id: pause
        delay: 300ms
`)
	ctx := context.Background()
	who := []string{"alice", "alice", "bob", "alice"}
	claims := make([]store.Claim, len(who))
	for i, w := range who {
		claims[i] = store.ManualClaim("g", fmt.Sprintf("c%d", i), []byte(fmt.Sprintf(`{"who": %q}`, w)))
	}
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.engine.ClaimTx(ctx, tx, claims)
		return err
	}))
	ids := make([]uuid.UUID, len(claims))
	for i, c := range claims {
		id, _, err := store.RunByKey(ctx, b.pool, "g", c.TriggerKey, c.Trigger)
		require.NoError(t, err)
		ids[i] = id
	}
	want := []store.RunStatus{store.RunQueued, store.RunThrottled, store.RunQueued, store.RunThrottled}
	for i, id := range ids {
		st := b.status(t, id)
		if want[i] == store.RunQueued {
			require.NotEqual(t, store.RunThrottled, st, "run %d (%s) has a free slot", i, who[i])
		} else {
			require.Equal(t, store.RunThrottled, st, "run %d waits for the %s run in flight", i, who[i])
		}
	}
	runs := make([]*store.Run, len(ids))
	for i, id := range ids {
		runs[i] = b.waitRun(t, id)
		require.Equal(t, store.RunCompleted, runs[i].Status)
	}
	// A step row's created_at is its transaction's start, which can precede
	// a commit that transaction waited on; when /a was called is what
	// "started" means for overlap.
	at := make([]time.Time, len(ids))
	for _, req := range b.recv.got("/a") {
		for i, id := range ids {
			if strings.Contains(req.Body, id.String()) {
				at[i] = req.Arrived
			}
		}
	}
	for i := range at {
		require.False(t, at[i].IsZero(), "run %d called /a", i)
	}
	// alice's runs never overlap, in claim order; bob's did not wait.
	for _, pair := range [][2]int{{0, 1}, {1, 3}} {
		require.False(t, at[pair[1]].Before(*runs[pair[0]].FinishedAt),
			"alice run %d started at %s before run %d finished at %s", pair[1], at[pair[1]], pair[0], *runs[pair[0]].FinishedAt)
	}
	require.True(t, at[2].Before(*runs[0].FinishedAt), "bob's run started while alice's was in flight")
}

// TestResumeStartsPausedClaimsThroughTheGuards: runs claimed while the
// workflow was paused pass its guards on resume; a durable rate limit of 3
// starts 3 of 6 and holds the rest as throttled.
func TestResumeStartsPausedClaimsThroughTheGuards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, fmt.Sprintf(guardedProject, "rate_limit: { max: 3, per: 1h, durable: true }"))
	waitPastBoundary(t, time.Hour, 20*time.Second)
	require.NoError(t, store.SetWorkflowPaused(ctx, b.pool, "g", true))
	ids := make([]uuid.UUID, 6)
	for i := range ids {
		ids[i] = b.manual(t, "g", fmt.Sprintf("p%d", i), nil)
	}
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.engine.ResumeWorkflowTx(ctx, tx, "g")
		return err
	}))
	started, held := 0, 0
	for _, id := range ids {
		if b.status(t, id) == store.RunThrottled {
			held++
		} else {
			started++
		}
	}
	require.Equal(t, 3, started, "a resume admits what the rate limit admits")
	require.Equal(t, 3, held, "the rest wait as throttled runs")
}
