package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// releaseEvery is how often held runs are offered their window again.
const releaseEvery = 250 * time.Millisecond

// releaseBatch caps how many runs of one workflow one release starts.
const releaseBatch = 500

// gate passes fresh runs through their workflows' throttle and rate_limit,
// in claim order, and holds the refused ones in status throttled (no job)
// until their window frees. Once one run of a workflow is held, every later
// one waits behind it, so runs start in claim order.
func (e *Engine) gate(ctx context.Context, tx pgx.Tx, runs []*store.Run) ([]*store.Run, error) {
	start := runs[:0:0]
	held := map[string]bool{}
	for _, run := range runs {
		p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
		if err != nil {
			return nil, err
		}
		if p.wf.Throttle == nil && p.wf.RateLimit == nil {
			start = append(start, run)
			continue
		}
		queued, seen := held[run.Workflow]
		if !seen {
			if queued, err = store.HasThrottledRuns(ctx, tx, run.Workflow); err != nil {
				return nil, err
			}
			held[run.Workflow] = queued
		}
		wake := time.Now().Add(releaseEvery)
		if !queued {
			ok, end, err := e.admit(ctx, tx, p.wf)
			if err != nil {
				return nil, err
			}
			if ok {
				start = append(start, run)
				continue
			}
			wake, held[run.Workflow] = end, true
		}
		if err := store.HoldRuns(ctx, tx, []uuid.UUID{run.ID}, wake); err != nil {
			return nil, err
		}
	}
	return start, nil
}

// releaseThrottled starts held runs as their windows free, oldest claim
// first, until ctx ends. Every process runs it; they serialise on the
// oldest held run's row lock. Held runs live in Postgres, so a restart
// loses none: the next process releases them.
func (e *Engine) releaseThrottled(ctx context.Context) {
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		names, err := store.ThrottledWorkflows(ctx, e.pool)
		if err != nil {
			if ctx.Err() == nil {
				e.logger.Warn("guards: list throttled runs", "err", err)
			}
			continue
		}
		for _, name := range names {
			if err := e.releaseWorkflow(ctx, name); err != nil && ctx.Err() == nil {
				e.logger.Warn("guards: release throttled runs", "workflow", name, "err", err)
			}
		}
	}
}

// releaseWorkflow starts the held runs of one workflow that its windows now
// admit, in claim order, in one transaction; it stops at the first refusal
// so no later run jumps ahead.
func (e *Engine) releaseWorkflow(ctx context.Context, name string) error {
	row, err := store.GetWorkflow(ctx, e.pool, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || row.Paused {
		return err // a paused workflow starts nothing; its held runs wait
	}
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		for range releaseBatch {
			run, err := store.NextThrottledRun(ctx, tx, name)
			if err != nil || run == nil {
				return err
			}
			if run.WakeAt != nil && time.Now().Before(*run.WakeAt) {
				return nil
			}
			p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
			if err != nil {
				return err
			}
			ok, end, err := e.admit(ctx, tx, p.wf)
			if err != nil {
				return err
			}
			if !ok {
				return store.HoldRuns(ctx, tx, []uuid.UUID{run.ID}, end)
			}
			if err := store.ReleaseRun(ctx, tx, run.ID); err != nil {
				return err
			}
			run.Status, run.WakeAt = store.RunQueued, nil
			if err := e.startRuns(ctx, tx, []*store.Run{run}); err != nil {
				return err
			}
		}
		return nil
	})
}
