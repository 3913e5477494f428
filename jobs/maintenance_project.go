package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/relayer"
)

// maintainProject enqueues the project's own periodic maintenance every
// repairInterval, into its own queue: the repair scan (RepairArgs) and,
// with a relayer, the relayer's recovery (relayer.RecoverArgs). Both scan
// only the project's runs and sends, so they cannot be River periodic jobs:
// River elects one leader per database, which may be another project's
// process, and would then enqueue only its own project's. Every process of
// the project enqueues; the unique options keep one job of each queued or
// running per queue, as the leader's periodic job did.
func (e *Engine) maintainProject(ctx context.Context) {
	t := time.NewTicker(repairInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := e.client.InsertMany(ctx, e.maintenanceJobs()); err != nil && ctx.Err() == nil {
			e.logger.Warn("enqueue the project's maintenance", "err", err)
		}
	}
}

// maintenanceJobs are the jobs one maintainProject tick enqueues.
func (e *Engine) maintenanceJobs() []river.InsertManyParams {
	opts := maintenanceOpts()
	opts.Queue = e.queue()
	opts.UniqueOpts.ByQueue = true
	jobs := []river.InsertManyParams{{Args: RepairArgs{}, InsertOpts: &opts}}
	if e.relayer != nil {
		jobs = append(jobs, river.InsertManyParams{Args: relayer.RecoverArgs{}, InsertOpts: &opts})
	}
	return jobs
}
