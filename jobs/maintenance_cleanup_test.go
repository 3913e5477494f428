package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// seedLedger inserts n expired and live entries.
func seedLedger(t *testing.T, pool *pgxpool.Pool, expired, live int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO rflow.idempotency_keys (scope, key, request_hash, status, response_status, response, expires_at)
		SELECT 'v1', 'old' || i, 'h', 'completed', 200, '\x7b7d'::bytea, now() - interval '1 minute' FROM generate_series(1, $1) i
		UNION ALL
		SELECT 'v1', 'live' || i, 'h', 'completed', 200, '\x7b7d'::bytea, now() + interval '1 hour' FROM generate_series(1, $2) i`,
		expired, live)
	require.NoError(t, err)
}

func countLedger(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM rflow.idempotency_keys`).Scan(&n))
	return n
}

func TestLedgerCleanupCycleIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	seedLedger(t, pool, 100, 7)

	w, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: pool, BatchSize: 10, MaxBatches: 3})
	require.NoError(t, err)

	var cycles []jobs.CleanupCycle
	for range 5 {
		c, err := w.Cycle(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, c.Deleted, int64(10*3), "a cycle deletes at most batch size × max batches")
		cycles = append(cycles, c)
	}
	require.Equal(t, []jobs.CleanupCycle{{Deleted: 30, Batches: 3}, {Deleted: 30, Batches: 3}, {Deleted: 30, Batches: 3}, {Deleted: 10, Batches: 2}, {Deleted: 0, Batches: 1}}, cycles,
		"full cycles, then ones that stop at the first partial batch")
	require.Equal(t, 7, countLedger(t, pool), "live entries survive")
}

func TestLedgerCleanupStopsAfterPartialBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	seedLedger(t, pool, 25, 0)

	// A partial batch (5 of 10) ends the cycle although 100 are allowed.
	w, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: pool, BatchSize: 10, MaxBatches: 100})
	require.NoError(t, err)
	c, err := w.Cycle(ctx)
	require.NoError(t, err)
	require.Equal(t, jobs.CleanupCycle{Deleted: 25, Batches: 3}, c)
	require.Zero(t, countLedger(t, pool))
}

func TestLedgerCleanupConfig(t *testing.T) {
	t.Parallel()
	_, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{})
	require.ErrorContains(t, err, "pool")
	_, err = jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: &pgxpool.Pool{}, BatchSize: -1})
	require.ErrorContains(t, err, "negative")
}

// TestLedgerCleanupPeriodicJob runs the periodic job in a real River client:
// it fires on start and deletes one bounded cycle.
func TestLedgerCleanupPeriodicJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := storetest.Pool(t)
	seedLedger(t, pool, 50, 3)

	w, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: pool, BatchSize: 5, MaxBatches: 2})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:       store.RiverSchema,
		Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers:      workers,
		PeriodicJobs: []*river.PeriodicJob{jobs.NewLedgerCleanupPeriodicJob(time.Hour)},
	})
	require.NoError(t, err)
	done, cancelSub := client.Subscribe(river.EventKindJobCompleted)
	defer cancelSub()
	require.NoError(t, client.Start(ctx))
	defer func() { require.NoError(t, client.Stop(context.Background())) }()

	select {
	case ev := <-done:
		require.Equal(t, jobs.LedgerCleanupArgs{}.Kind(), ev.Job.Kind)
	case <-ctx.Done():
		t.Fatal("the cleanup job did not run on start")
	}
	require.Equal(t, 50+3-5*2, countLedger(t, pool), "one cycle deletes batch × count rows, no more")

	// A second insert while nothing runs is accepted; the unique options
	// keep a duplicate from queueing behind it.
	res, err := client.Insert(ctx, jobs.LedgerCleanupArgs{}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.False(t, res.UniqueSkippedAsDuplicate)
	res, err = client.Insert(ctx, jobs.LedgerCleanupArgs{}, nil)
	require.NoError(t, err)
	require.True(t, res.UniqueSkippedAsDuplicate)
}

func TestCleanupDeletesEndedGuardWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)

	for _, wf := range []string{"short", "long"} {
		per := time.Second
		if wf == "long" {
			per = 30 * 24 * time.Hour
		}
		ok, end, err := store.TakeWindowSlot(ctx, pool, wf, store.GuardRateLimit, 5, per)
		require.NoError(t, err)
		require.True(t, ok)
		var recorded time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT window_end FROM rflow.rate_limit_buckets WHERE workflow = $1`, wf).Scan(&recorded))
		require.WithinDuration(t, end, recorded, time.Millisecond, "the window's end is recorded with it")
	}
	// The short window as if it ended two hours ago, and one written before
	// ends were recorded.
	_, err := pool.Exec(ctx, `
		UPDATE rflow.rate_limit_buckets SET window_start = window_start - interval '2 hours',
			window_end = window_end - interval '2 hours' WHERE workflow = 'short'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO rflow.rate_limit_buckets (workflow, guard, window_start, count)
		VALUES ('legacy', 'throttle', now() - interval '400 days', 3)`)
	require.NoError(t, err)

	w, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: pool})
	require.NoError(t, err)
	c, err := w.Cycle(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Windows)

	rows, err := pool.Query(ctx, `SELECT workflow FROM rflow.rate_limit_buckets ORDER BY workflow`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"legacy", "long"}, left, "a live window and one of unknown length stay")
}

// The defaults keep up with 1,000 new command keys a second: one cycle of
// the minute-long interval deletes a minute's worth (60,000) of expired keys.
func TestLedgerCleanupDefaultsKeepUpWithAThousandKeysASecond(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	seedLedger(t, pool, 60_000, 0)
	w, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: pool})
	require.NoError(t, err)
	c, err := w.Cycle(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(60_000), c.Deleted)
	require.Zero(t, countLedger(t, pool))
	require.LessOrEqual(t, jobs.DefaultLedgerCleanupInterval, time.Minute)
}
