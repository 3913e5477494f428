package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// releaseEvery is how often held runs are offered their window again.
const releaseEvery = 250 * time.Millisecond

// releaseBatch caps how many runs of one workflow one release starts.
const releaseBatch = 500

// gate passes fresh runs through their workflows' guards, in claim order,
// and holds the refused ones in status throttled (no job) until they are
// admitted. Once a run is held, every later one of its workflow (of its
// concurrency key, when concurrency refused it) waits behind it, so runs
// start in claim order.
func (e *Engine) gate(ctx context.Context, tx pgx.Tx, runs []*store.Run) ([]*store.Run, error) {
	start := runs[:0:0]
	held := map[string]bool{} // workflow, or workflow + "\x00" + key
	// ahead is the latest wake of the runs a queue's next run waits behind:
	// it cannot start before they do, so its own wake_at says at least
	// that (runs show prints it as the next try).
	ahead := map[string]time.Time{}
	for _, run := range runs {
		p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
		if err != nil {
			return nil, err
		}
		if !guarded(p.wf) {
			start = append(start, run)
			continue
		}
		key := e.concurrencyKey(p, run)
		queue := run.Workflow
		if key != nil {
			queue += "\x00" + *key
		}
		behind, seen := held[queue]
		if !seen {
			var wake time.Time
			if behind, wake, err = store.HasThrottledRuns(ctx, tx, run.Workflow, key); err != nil {
				return nil, err
			}
			held[queue] = behind
			ahead[queue] = wake
		}
		wake := time.Now().Add(releaseEvery)
		if !behind && !held[run.Workflow] {
			v, err := e.admit(ctx, tx, p.wf, run, key)
			if err != nil {
				return nil, err
			}
			if v.ok {
				start = append(start, run)
				continue
			}
			wake = v.wake
			if v.byKey {
				held[queue] = true
				ahead[queue] = wake
			} else {
				held[run.Workflow] = true
				ahead[run.Workflow] = wake
			}
		}
		for _, q := range []string{queue, run.Workflow} {
			if w := ahead[q]; held[q] && w.After(wake) {
				wake = w
			}
		}
		if err := store.HoldRun(ctx, tx, run.ID, wake, key); err != nil {
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
			if !e.owns(name) {
				continue // a rehearsal's runs start in its own process
			}
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
		var skip []string // concurrency keys whose oldest run still waits
		for range releaseBatch {
			run, key, err := store.NextThrottledRun(ctx, tx, name, skip)
			if err != nil || run == nil {
				return err
			}
			p, err := e.plan(ctx, tx, run.Workflow, run.Generation)
			if err != nil {
				return err
			}
			var v verdict
			if run.WakeAt != nil && time.Now().Before(*run.WakeAt) {
				// Not due: only a concurrency-only hold lets later keys by.
				v.byKey = key != nil && p.wf.Throttle == nil && p.wf.RateLimit == nil
			} else {
				if v, err = e.admit(ctx, tx, p.wf, run, key); err != nil {
					return err
				}
				if !v.ok {
					if err := store.HoldRun(ctx, tx, run.ID, v.wake, nil); err != nil {
						return err
					}
				}
			}
			if !v.ok {
				if !v.byKey || key == nil {
					return nil // the workflow's window is full: nothing later may start
				}
				skip = append(skip, *key)
				continue
			}
			if err := store.ReleaseRun(ctx, tx, run.ID); err != nil {
				return err
			}
			run.Status, run.WakeAt = store.RunQueued, nil
			if err := e.startRuns(ctx, tx, []*store.Run{run}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
