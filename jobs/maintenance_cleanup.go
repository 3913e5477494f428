package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rflow-dev/rflow/store"
)

// Ledger cleanup defaults: a cycle every minute deletes at most 20 × 5,000
// expired idempotency keys, so it keeps up with 100,000 new keys a minute
// (1,600 a second) while each batch holds its row locks for one DELETE,
// and a larger backlog drains over a few cycles without monopolising
// Postgres. rflow.yaml's idempotency.cleanup overrides them.
const (
	DefaultLedgerCleanupInterval   = time.Minute
	DefaultLedgerCleanupBatchSize  = 5000
	DefaultLedgerCleanupMaxBatches = 20
)

// LedgerCleanupArgs is the periodic job that deletes expired idempotency
// ledger entries.
type LedgerCleanupArgs struct{}

// Kind names the job in River.
func (LedgerCleanupArgs) Kind() string { return "rflow.ledger_cleanup" }

// InsertOpts keeps at most one cleanup job queued or running: a slow cycle
// never piles up behind another.
func (LedgerCleanupArgs) InsertOpts() river.InsertOpts { return maintenanceOpts() }

// maintenanceOpts are the insert options of a periodic maintenance job: at
// most one queued or running at a time, so a slow cycle never piles up
// behind another, and a few attempts (the next period tries again anyway).
func maintenanceOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: 3,
		UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateScheduled, rivertype.JobStateRetryable,
		}},
	}
}

// LedgerCleanupWorker deletes expired ledger entries in bounded cycles: each
// batch is one DELETE of at most BatchSize rows taken from the expiry index
// with FOR UPDATE SKIP LOCKED (so concurrent cleaners and live claims never
// wait on it), at most MaxBatches batches per cycle, and the cycle stops
// early after a partial batch (the backlog is drained).
type LedgerCleanupWorker struct {
	river.WorkerDefaults[LedgerCleanupArgs]

	pool       *pgxpool.Pool
	logger     *slog.Logger
	batchSize  int
	maxBatches int
}

// LedgerCleanupConfig configures a LedgerCleanupWorker. Zero values take
// the defaults above.
type LedgerCleanupConfig struct {
	Pool       *pgxpool.Pool
	Logger     *slog.Logger
	BatchSize  int
	MaxBatches int
}

// NewLedgerCleanupWorker returns the worker; register it with
// river.AddWorker(workers, w).
func NewLedgerCleanupWorker(cfg LedgerCleanupConfig) (*LedgerCleanupWorker, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("ledger cleanup: a database pool is required")
	}
	if cfg.BatchSize < 0 || cfg.MaxBatches < 0 {
		return nil, fmt.Errorf("ledger cleanup: batch size (%d) and max batches (%d) must not be negative",
			cfg.BatchSize, cfg.MaxBatches)
	}
	w := &LedgerCleanupWorker{pool: cfg.Pool, logger: cfg.Logger, batchSize: cfg.BatchSize, maxBatches: cfg.MaxBatches}
	if w.batchSize == 0 {
		w.batchSize = DefaultLedgerCleanupBatchSize
	}
	if w.maxBatches == 0 {
		w.maxBatches = DefaultLedgerCleanupMaxBatches
	}
	if w.logger == nil {
		w.logger = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// NewLedgerCleanupPeriodicJob schedules a cleanup cycle every interval
// (DefaultLedgerCleanupInterval when zero), starting at leader election.
func NewLedgerCleanupPeriodicJob(interval time.Duration) *river.PeriodicJob {
	if interval <= 0 {
		interval = DefaultLedgerCleanupInterval
	}
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return LedgerCleanupArgs{}, nil },
		&river.PeriodicJobOpts{ID: "rflow.ledger_cleanup", RunOnStart: true})
}

// Work runs one bounded cleanup cycle.
func (w *LedgerCleanupWorker) Work(ctx context.Context, _ *river.Job[LedgerCleanupArgs]) error {
	_, err := w.Cycle(ctx)
	return err
}

// CleanupCycle reports what one cycle did.
type CleanupCycle struct {
	Deleted int64 // expired idempotency keys
	Batches int   // batches of keys
	Windows int64 // ended rate_limit / throttle windows
}

// Cycle deletes expired ledger entries, then ended guard windows, each in at
// most maxBatches batches. Each batch commits on its own, so locks are held
// for one batch only, and a batch that deletes fewer rows than the batch
// size ends that table's part of the cycle.
func (w *LedgerCleanupWorker) Cycle(ctx context.Context) (CleanupCycle, error) {
	var c CleanupCycle
	var err error
	if c.Deleted, c.Batches, err = w.drain(ctx, store.DeleteExpiredIdempotencyKeys); err != nil {
		return c, fmt.Errorf("ledger cleanup: %w", err)
	}
	if c.Windows, _, err = w.drain(ctx, store.DeleteEndedWindows); err != nil {
		return c, fmt.Errorf("guard window cleanup: %w", err)
	}
	if c.Deleted > 0 {
		w.logger.InfoContext(ctx, "expired idempotency keys deleted", "count", c.Deleted, "batches", c.Batches)
	}
	if c.Windows > 0 {
		w.logger.InfoContext(ctx, "ended guard windows deleted", "count", c.Windows)
	}
	return c, nil
}

// drain runs del in batches of batchSize until a partial batch or maxBatches.
func (w *LedgerCleanupWorker) drain(ctx context.Context, del func(context.Context, store.DBTX, int) (int64, error)) (int64, int, error) {
	var deleted int64
	batches := 0
	for batches < w.maxBatches {
		n, err := del(ctx, w.pool, w.batchSize)
		if err != nil {
			return deleted, batches, fmt.Errorf("batch %d: %w", batches+1, err)
		}
		batches++
		deleted += n
		if n < int64(w.batchSize) {
			break
		}
	}
	return deleted, batches, nil
}
