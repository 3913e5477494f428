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

// verdict is what the guards of a workflow say about one run.
type verdict struct {
	ok   bool
	wake time.Time // when refused: when to offer the run again
	// byKey: refused by concurrency, so only runs of the same key wait
	// behind it; otherwise the whole workflow's window is full.
	byKey bool
}

// admit passes one run about to start in tx through the guards of wf:
// concurrency (key is the run's concurrency key), then throttle, then
// rate_limit. A run counts once, when its first side-effecting step is
// enqueued. When a window is full it takes no slot of any (the Postgres
// slots taken so far roll back with a savepoint) and says when that window
// ends.
func (e *Engine) admit(ctx context.Context, tx pgx.Tx, wf *workflow.Workflow, run *store.Run, key *string) (verdict, error) {
	if c := wf.Concurrency; c != nil {
		ok, err := store.TakeConcurrencySlot(ctx, tx, wf.Name, *key, run.ID, c.Max)
		if err != nil || !ok {
			// Re-offered each release tick: a finishing run frees a slot
			// at no particular time.
			return verdict{wake: time.Now().Add(releaseEvery), byKey: true}, err
		}
	}
	if wf.Throttle == nil && wf.RateLimit == nil {
		return verdict{ok: true}, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return verdict{}, fmt.Errorf("guards of %s: %w", wf.Name, err)
	}
	defer func() { _ = sp.Rollback(ctx) }()
	if t := wf.Throttle; t != nil {
		ok, end, err := store.TakeWindowSlot(ctx, sp, wf.Name, store.GuardThrottle, t.Max, t.Per)
		if err != nil || !ok {
			return verdict{wake: end}, err
		}
	}
	if r := wf.RateLimit; r != nil && r.Durable {
		ok, end, err := store.TakeWindowSlot(ctx, sp, wf.Name, store.GuardRateLimit, r.Max, r.Per)
		if err != nil || !ok {
			return verdict{wake: end}, err
		}
	}
	if err := sp.Commit(ctx); err != nil {
		return verdict{}, fmt.Errorf("guards of %s: %w", wf.Name, err)
	}
	// The in-process window goes last: it cannot roll back, so it is only
	// taken once nothing else can refuse (a rollback of tx afterwards
	// over-counts, which errs on the side of the limit). Its clock is the
	// transaction's, like the durable window's: the run's first step is
	// stamped with it, so the window that counts a run is the one its
	// recorded start falls in (the process clock at this point can be a
	// window later than the transaction's start under load).
	if r := wf.RateLimit; r != nil && !r.Durable {
		now, err := store.TxTime(ctx, tx)
		if err != nil {
			return verdict{}, fmt.Errorf("guards of %s: %w", wf.Name, err)
		}
		if ok, end := e.rates.take(wf.Name, r.Max, r.Per, now); !ok {
			return verdict{wake: end}, nil
		}
	}
	return verdict{ok: true}, nil
}

// guarded reports whether wf has any guard that gates run starts.
func guarded(wf *workflow.Workflow) bool {
	return wf.Throttle != nil || wf.RateLimit != nil || wf.Concurrency != nil
}

// concurrencyKey evaluates the workflow's concurrency key for run (nil when
// the workflow has no concurrency). A key that fails to evaluate puts the
// run under the empty key, which still bounds it, rather than lose it.
func (e *Engine) concurrencyKey(p *plan, run *store.Run) *string {
	c := p.wf.Concurrency
	if c == nil {
		return nil
	}
	key := ""
	if c.Key != nil {
		a, err := e.newAdvance(p, run, nil)
		if err == nil {
			var v any
			if v, err = c.Key.Eval(a.env(loc{})); err == nil {
				if s, isStr := v.(string); isStr {
					key = s
				} else {
					key = string(mustJSON(v))
				}
			}
		}
		if err != nil {
			e.logger.Warn("concurrency key did not evaluate; the run waits under the empty key", "run", run.ID, "err", err)
		}
	}
	return &key
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
// now is a transaction's start, so calls need not come in time order: one
// whose window is older than the current one is refused (its count is
// gone; starting a fresh one would admit more than max in it), and the run
// is offered again by the next release, in a newer transaction.
func (w *rateWindows) take(workflow string, max int, per time.Duration, now time.Time) (bool, time.Time) {
	start := time.Unix(0, now.UnixNano()/int64(per)*int64(per))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*rateWindow{}
	}
	cur := w.m[workflow]
	switch {
	case cur == nil || cur.start.Before(start):
		cur = &rateWindow{start: start}
		w.m[workflow] = cur
	case start.Before(cur.start):
		return false, start.Add(per)
	}
	if cur.count >= max {
		return false, start.Add(per)
	}
	cur.count++
	return true, start.Add(per)
}
