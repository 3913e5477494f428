package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// Repair bounds: a cycle enqueues at most repairBatch × repairMaxBatches
// steps, so a restore that lost every job drains over a few minutes
// instead of in one long scan.
const (
	repairInterval   = time.Minute
	repairBatch      = 500
	repairMaxBatches = 10
)

// RepairArgs is the periodic job that finds pending steps whose River job
// is gone and enqueues them again at their journal position.
type RepairArgs struct{}

// Kind names the job in River.
func (RepairArgs) Kind() string { return "rflow.repair" }

// InsertOpts keeps at most one repair job queued or running.
func (RepairArgs) InsertOpts() river.InsertOpts { return maintenanceOpts() }

type repairWorker struct {
	river.WorkerDefaults[RepairArgs]
	e *Engine
}

func (w *repairWorker) Work(ctx context.Context, _ *river.Job[RepairArgs]) error {
	_, err := w.e.RepairRuns(ctx)
	return err
}

// RepairRuns enqueues again every pending step whose River job is gone (see
// store.JoblessSteps: deleted in River UI, lost in a restore), at the
// attempt its journal row holds and, for a parked step, at its wake time:
// the step then runs exactly as its lost job would have, fenced the same
// way. Each repair is journaled (`runs show` lists it) and counted in
// rflow_runs_repaired_total. It returns how many steps it repaired.
func (e *Engine) RepairRuns(ctx context.Context) (int, error) {
	repaired := 0
	for _, j := range []store.Journal{store.RunJournal, store.ReorgJournal} {
		for range repairMaxBatches {
			steps, err := store.JoblessSteps(ctx, e.pool, e.ns, j, repairBatch)
			if err != nil {
				return repaired, err
			}
			for _, s := range steps {
				ok, err := e.repairStep(ctx, s)
				if err != nil {
					return repaired, err
				}
				if ok {
					repaired++
				}
			}
			if len(steps) < repairBatch {
				break
			}
		}
	}
	return repaired, nil
}

// repairStep enqueues s's job if, under its run's lock, s still has none.
func (e *Engine) repairStep(ctx context.Context, s store.JoblessStep) (bool, error) {
	var repaired bool
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		still, err := store.StillJobless(ctx, tx, s)
		if err != nil || !still {
			return err
		}
		run := &store.Run{ID: s.RunID, Workflow: s.Workflow, Generation: s.Generation, Attempt: s.RunAttempt, Journal: s.Journal}
		var at *time.Time
		if s.WakeAt != nil && s.WakeAt.After(time.Now()) {
			at = s.WakeAt
		}
		if _, err := e.client.InsertManyTx(ctx, tx, []river.InsertManyParams{e.stepJob(run, s.StepKey, s.Attempt, at)}); err != nil {
			return fmt.Errorf("repair %s %s: enqueue step %s: %w", s.Journal, s.RunID, s.StepKey, err)
		}
		if err := store.RecordRepair(ctx, tx, s); err != nil {
			return err
		}
		repaired = true
		return nil
	})
	if err != nil || !repaired {
		return false, err
	}
	e.observer.RunRepaired(s.Workflow)
	e.logger.Warn("run repaired: its pending step had no River job (deleted or lost); enqueued it again",
		"run", s.RunID, "journal", s.Journal.String(), "workflow", s.Workflow, "step", s.StepKey, "attempt", s.Attempt)
	return true, nil
}
