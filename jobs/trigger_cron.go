package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// maxCatchUp bounds how many missed cron slots catch_up replays.
const maxCatchUp = 100

// RunCron claims the due ticks of every deployed cron workflow until ctx
// ends. Every process may run it: the tick's time is the claim key, so the
// claim gate makes each tick a single run however many processes see it.
// A tick missed while no process ran is skipped, unless the trigger has
// catch_up: true (then the newest 100 missed slots are claimed on boot). A
// claim that fails transiently is retried until the next tick is due.
func (e *Engine) RunCron(ctx context.Context) {
	boot := time.Now().UTC()
	last := map[string]time.Time{}
	var crons map[string]*workflow.CronTrigger
	var refreshed time.Time
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if time.Since(refreshed) > 5*time.Second {
			if m, err := e.cronTriggers(ctx); err == nil {
				crons, refreshed = m, time.Now()
			} else if ctx.Err() == nil {
				e.logger.Warn("cron: list workflows", "err", err)
			}
		}
		now := time.Now().UTC()
		for name, ct := range crons {
			prev, seen := last[name]
			if !seen {
				prev = boot
				if ct.CatchUp {
					if tick, err := store.LastCronTick(ctx, e.pool, name); err == nil && !tick.IsZero() {
						prev = tick
					}
				}
				last[name] = prev
			}
			due := dueTicks(ct, prev, now, ct.CatchUp)
			if len(due) == 0 {
				continue
			}
			if err := e.claimTicks(ctx, name, due); err != nil {
				if ctx.Err() == nil {
					e.logger.Warn("cron: claim failed, retrying", "workflow", name, "tick", due[len(due)-1], "err", err)
				}
				continue
			}
			last[name] = due[len(due)-1]
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dueTicks lists the ticks in (prev, now]. Without catchUp only the newest
// is kept: an older tick whose window (until the next tick) has passed is
// missed, not run late.
func dueTicks(ct *workflow.CronTrigger, prev, now time.Time, catchUp bool) []time.Time {
	var due []time.Time
	for tick := ct.Next(prev); !tick.After(now); tick = ct.Next(tick) {
		due = append(due, tick)
		if len(due) > maxCatchUp {
			due = due[1:]
		}
	}
	if !catchUp && len(due) > 1 {
		due = due[len(due)-1:]
	}
	return due
}

func (e *Engine) claimTicks(ctx context.Context, name string, ticks []time.Time) error {
	claims := make([]store.Claim, len(ticks))
	for i, tick := range ticks {
		key := tick.UTC().Format(time.RFC3339)
		payload, err := json.Marshal(trigger.CronPayload{Tick: key})
		if err != nil {
			return err
		}
		claims[i] = store.Claim{Workflow: name, TriggerKey: key, TriggerKind: trigger.Cron, Trigger: payload}
	}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := e.ClaimTx(ctx, tx, claims)
		return err
	})
	if err == nil {
		e.faults.Hit(FaultAfterClaim)
	}
	return err
}

// cronTriggers returns the cron trigger of every deployed workflow, from
// its current generation.
func (e *Engine) cronTriggers(ctx context.Context) (map[string]*workflow.CronTrigger, error) {
	rows, err := store.ListWorkflows(ctx, e.pool)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, r.Name)
	}
	missing, err := e.missingFromFile(ctx, names)
	if err != nil {
		return nil, err
	}
	out := map[string]*workflow.CronTrigger{}
	for _, r := range rows {
		if r.RetiredAt != nil || missing[r.Name] {
			continue // its triggers stopped, or are not this file's
		}
		p, err := e.plan(ctx, e.pool, r.Name, r.Generation)
		var uc *uncompiledError
		switch {
		case errors.As(err, &uc):
			e.warnUncompiled(uc) // whatever its trigger: logged once, named by its kind
			continue
		case err != nil:
			e.logger.Warn("cron: cannot read a deployed workflow", "workflow", r.Name, "generation", r.Generation, "err", err)
			continue
		}
		if p.wf.Trigger.Cron != nil {
			out[r.Name] = p.wf.Trigger.Cron
		}
	}
	return out, nil
}
