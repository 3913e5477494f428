package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// admit takes a slot of every window guarding wf (throttle, then
// rate_limit) for one run about to start in tx: a run counts once, when its
// first side-effecting step is enqueued. When a window is full it takes
// none (the Postgres slots taken so far roll back with a savepoint) and
// returns when that window ends.
func (e *Engine) admit(ctx context.Context, tx pgx.Tx, wf *workflow.Workflow) (bool, time.Time, error) {
	if wf.Throttle == nil && wf.RateLimit == nil {
		return true, time.Time{}, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("guards of %s: %w", wf.Name, err)
	}
	defer func() { _ = sp.Rollback(ctx) }()
	if t := wf.Throttle; t != nil {
		ok, end, err := store.TakeWindowSlot(ctx, sp, wf.Name, store.GuardThrottle, t.Max, t.Per)
		if err != nil || !ok {
			return false, end, err
		}
	}
	if r := wf.RateLimit; r != nil && r.Durable {
		ok, end, err := store.TakeWindowSlot(ctx, sp, wf.Name, store.GuardRateLimit, r.Max, r.Per)
		if err != nil || !ok {
			return false, end, err
		}
	}
	if err := sp.Commit(ctx); err != nil {
		return false, time.Time{}, fmt.Errorf("guards of %s: %w", wf.Name, err)
	}
	// The in-process window goes last: it cannot roll back, so it is only
	// taken once nothing else can refuse (a rollback of tx afterwards
	// over-counts, which errs on the side of the limit).
	if r := wf.RateLimit; r != nil && !r.Durable {
		if ok, end := e.rates.take(wf.Name, r.Max, r.Per, time.Now()); !ok {
			return false, end, nil
		}
	}
	return true, time.Time{}, nil
}

// rateWindows are the in-process fixed windows of rate_limits without
// durable: true. They live in this process only, so a restart or another
// node starts them fresh (documented in docs/reliability.md).
type rateWindows struct {
	mu sync.Mutex
	m  map[string]*rateWindow
}

type rateWindow struct {
	start time.Time
	count int
}

// take counts one admission in the current window of workflow, unless it
// holds max already; windows align to the Unix epoch like the durable ones.
func (w *rateWindows) take(workflow string, max int, per time.Duration, now time.Time) (bool, time.Time) {
	start := time.Unix(0, now.UnixNano()/int64(per)*int64(per))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*rateWindow{}
	}
	cur := w.m[workflow]
	if cur == nil || !cur.start.Equal(start) {
		cur = &rateWindow{start: start}
		w.m[workflow] = cur
	}
	if cur.count >= max {
		return false, start.Add(per)
	}
	cur.count++
	return true, start.Add(per)
}
