package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/store"
)

// pollReorgs prints the reorgs recorded after *last, and moves *last on.
func (v *devView) pollReorgs(ctx context.Context, pool *pgxpool.Pool, last *int64) error {
	reorgs, err := store.ReorgsAfter(ctx, pool, *last)
	if err != nil {
		return err
	}
	for _, r := range reorgs {
		*last = r.ID
		v.reorg(r)
	}
	return nil
}

func (v *devView) reorg(r store.ReorgEvent) {
	network := v.networkName(r.ChainID)
	if v.tty {
		v.printf("%s %s reorg on %s at block %d: %d block(s) replaced, %d run(s) orphaned", v.stamp(r.DetectedAt),
			v.color(ansiYell, "⚠"), v.color(ansiBold, network), r.ForkBlock, r.Depth, r.OrphanedRuns)
		return
	}
	v.printf("%s reorg network=%s chain_id=%d fork_block=%d depth=%d orphaned_runs=%d", v.stamp(r.DetectedAt), network,
		r.ChainID, r.ForkBlock, r.Depth, r.OrphanedRuns)
}

// pollResponses prints what changed in the on_reorg responses of an
// orphaned run: decided, started, ended, or its log back in the chain.
func (v *devView) pollResponses(ctx context.Context, pool *pgxpool.Pool, r *store.Run, w *watchedRun) error {
	if r.OrphanedAt == nil {
		return nil
	}
	open := len(w.responses) == 0
	for _, s := range w.responses {
		open = open || !s.Terminal()
	}
	if !open {
		return nil
	}
	resps, err := store.RunResponses(ctx, pool, r.ID)
	if err != nil {
		return err
	}
	for _, resp := range resps {
		status := resp.Status
		if status == store.RunQueued {
			status = store.RunRunning // one "started" line, however fast it starts
		}
		if prev, ok := w.responses[resp.ID]; ok && prev == status {
			continue
		}
		w.responses[resp.ID] = status
		v.response(r, resp)
	}
	return nil
}

// responseWords says what an on_reorg response's status means for its run.
func responseWords(resp *store.Response) string {
	switch resp.Status {
	case store.RunPending:
		return fmt.Sprintf("orphaned by the reorg at block %d; on_reorg decides at block %d", resp.ForkBlock, resp.DecideAt)
	case store.RunReincluded:
		return fmt.Sprintf("its log is back in the chain after the reorg at block %d: no on_reorg", resp.ForkBlock)
	case store.RunCompleted:
		return "on_reorg completed"
	case store.RunFailed:
		return "on_reorg failed"
	case store.RunCancelled:
		return "on_reorg cancelled"
	case store.RunQueued, store.RunRunning:
		return fmt.Sprintf("on_reorg started: the reorg at block %d orphaned its log", resp.ForkBlock)
	}
	return "on_reorg " + string(resp.Status)
}

func (v *devView) response(r *store.Run, resp *store.Response) {
	at := resp.UpdatedAt
	errText := ""
	if resp.Error != nil {
		errText = oneLine(*resp.Error, 80)
	}
	if v.tty {
		mark := v.color(ansiYell, "↺")
		switch resp.Status {
		case store.RunFailed:
			mark = v.color(ansiRed, "✗")
		case store.RunCompleted, store.RunReincluded:
			mark = v.color(ansiGreen, "✓")
		}
		v.printf("%s %s %s %s %s", v.stamp(at), v.who(r), mark, responseWords(resp), v.color(ansiDim, errText))
		return
	}
	v.printf("%s", plainLine(fmt.Sprintf("%s %s on_reorg=%s status=%s fork_block=%d decide_at=%d", v.stamp(at), plainWho(r),
		resp.ID, resp.Status, resp.ForkBlock, resp.DecideAt), "", errText))
}
