package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// A wait_for step parks its run on an event. Its conditions and deadline
// are a row of rflow.waits written in the transaction that parks it; the
// wait feed of its (network, contract, event) matches logs against it
// (MatchTx, step_wait_match.go) and settles it at depth; its step job, scheduled
// at the deadline, times it out. The wait row's status decides which of
// the two settles: each moves it out of waiting/armed under the run's
// lock, and the loser finds nothing left to do.

// arriveWaitFor persists the wait and parks the step as waiting, its job
// scheduled at the deadline (at once when there is none: the job then has
// nothing to do, and only a match settles the step).
func (a *advance) arriveWaitFor(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error) {
	w, err := a.e.newWait(ctx, tx, a, l, key, 1, a.orEnv(env, l))
	if err != nil {
		return nil, a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: %v", l.n.step.ID, err))
	}
	if err := store.InsertWait(ctx, tx, w); err != nil {
		return nil, err
	}
	a.park(l, key, store.StepWaiting, w.Deadline)
	a.status = store.RunWaitingEvent
	return nil, nil
}

// newWait builds the wait of the wait_for step at l: the feed it listens
// on, the index key of its where (see workflow.WaitKey), its depth, its
// deadline and the block its lookback starts at.
func (e *Engine) newWait(ctx context.Context, tx pgx.Tx, a *advance, l loc, key string, attempt int, env workflow.Env) (store.Wait, error) {
	s := l.n.step
	wf := s.WaitFor
	if wf == nil || wf.Event == nil || wf.Event.ABIEvent == nil {
		return store.Wait{}, errors.New("wait_for has no event")
	}
	c := e.project.Contract(wf.Event.Contract)
	if c == nil {
		return store.Wait{}, fmt.Errorf("wait_for: unknown contract %s", wf.Event.Contract)
	}
	n := e.project.Network(c.Network)
	if n == nil {
		return store.Wait{}, fmt.Errorf("wait_for: contract %s has unknown network %s", c.Name, c.Network)
	}
	w := store.Wait{
		RunID: a.run.ID, StepKey: key, StepID: s.ID, Attempt: attempt, ChainID: int64(n.ChainID),
		Contract: c.Name, Event: wf.Event.Event, Topic: wf.Event.ABIEvent.ID.Hex(),
		Confirmations: n.Confirmations, OnTimeout: "fail",
	}
	if c.Address != ([20]byte{}) {
		w.Address = strings.ToLower(c.Address.Hex())
	}
	if wf.Confirmations != nil {
		w.Confirmations = *wf.Confirmations
	}
	if wf.Finality != "" {
		tag := wf.Finality
		w.Finality, w.Confirmations = &tag, 0
	}
	if wf.Event.Where != nil {
		src := wf.Event.Where.Source()
		w.Where = &src
		w.MatchKey = matchKey(wf.Event.Keys, env)
	}
	if wf.Timeout > 0 {
		d := time.Now().Add(wf.Timeout)
		w.Deadline = &d
		if wf.OnTimeoutGoto != "" {
			w.OnTimeout = "goto:" + wf.OnTimeoutGoto
		}
	}
	from, ok, err := e.lookbackFrom(ctx, tx, a, w.ChainID)
	if err != nil {
		return store.Wait{}, err
	}
	// Without a window the chain was never followed: the feed starts at
	// the head when it first runs, and nothing before it can match.
	w.FromBlock, w.LookbackDone = from, !ok
	return w, nil
}

// matchKey is the index key of a wait: the first equality of its where
// whose value has an index form. "" makes every log of the event a
// candidate.
func matchKey(keys []workflow.WaitKey, env workflow.Env) string {
	for _, k := range keys {
		v, err := k.Value.Eval(env)
		if err != nil {
			continue
		}
		if iv, ok := workflow.IndexValue(v); ok {
			return k.Field + "=" + iv
		}
	}
	return ""
}

// lookbackFrom is the block a wait's matching starts at, so no wake-up is
// lost between the trigger and the park: the triggering log's block for a
// run an event on the same chain started, else the newest block of the
// chain's window when the step parks. ok is false when the chain has no
// window yet.
func (e *Engine) lookbackFrom(ctx context.Context, tx pgx.Tx, a *advance, chainID int64) (int64, bool, error) {
	if a.run.TriggerKind == trigger.Event {
		if id, _, _ := strings.Cut(a.run.TriggerKey, ":"); id == strconv.FormatInt(chainID, 10) {
			if b, ok := toInt64(a.triggerData()["block"]); ok {
				return b, true, nil
			}
		}
	}
	head, ok, err := store.WindowHead(ctx, tx, chainID)
	if err != nil || !ok {
		return 0, false, err
	}
	return head.Number, true, nil
}

func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case uint64:
		return int64(v), true
	case float64:
		return int64(v), true
	}
	return 0, false
}

// execWaitFor is the wait's step job: it times the wait out at its
// deadline, unless a match settled it first. A step reopened by `runs
// retry` has no wait at its new attempt yet: the job parks it now.
func (e *Engine) execWaitFor(ctx context.Context, x *attempt) (outcome, error) {
	w, err := store.GetWait(ctx, e.pool, x.run.ID, x.step.Key, x.step.Attempt)
	if errors.Is(err, store.ErrNotFound) {
		err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			nw, err := e.newWait(ctx, tx, x.a, x.l, x.step.Key, x.step.Attempt, x.a.env(x.l))
			if err != nil {
				return err
			}
			return store.InsertWait(ctx, tx, nw)
		})
		if err != nil {
			return outcome{err: err}, nil
		}
		w, err = store.GetWait(ctx, e.pool, x.run.ID, x.step.Key, x.step.Attempt)
	}
	if err != nil {
		return outcome{}, err
	}
	if (w.Status != store.WaitWaiting && w.Status != store.WaitArmed) || w.Deadline == nil {
		return outcome{parked: true}, nil
	}
	if d := time.Until(*w.Deadline); d > 0 {
		return outcome{}, river.JobSnooze(d)
	}
	return outcome{parked: true}, e.timeOut(ctx, x, w)
}

// timeOut settles a wait whose deadline passed: on_timeout fail fails the
// step, on_timeout goto completes it and jumps, journaled in the same
// transaction as the wait's status and the target step, so a crash lands
// on the same named step. A wait a match ended first is left alone.
func (e *Engine) timeOut(ctx context.Context, x *attempt, w *store.Wait) error {
	return e.jobTx(ctx, x.job, "wait timeout fenced off", func(tx pgx.Tx) error {
		if _, err := store.GetRun(ctx, tx, x.run.ID, true); err != nil {
			return err
		}
		ended, err := store.EndWait(ctx, tx, w.ID, store.WaitTimedOut, 0)
		if err != nil || !ended {
			return err // matched or cancelled meanwhile: nothing to settle
		}
		o := outcome{}
		wf := x.l.n.step.WaitFor
		if target, ok := strings.CutPrefix(w.OnTimeout, "goto:"); ok {
			o.output = map[string]any{"timed_out": true, "goto": target}
			o.jump = target
		} else {
			o.err = fmt.Errorf("wait_for timed out after %s: no %s.%s event matched", wf.Timeout, w.Contract, w.Event)
		}
		if x.a.status == store.RunWaitingEvent {
			x.a.status = store.RunRunning
		}
		ok, err := e.resumeAt(ctx, tx, x.a, o, stepAt{l: x.l, row: x.step})
		if err != nil || !ok {
			return orStale(err)
		}
		return nil
	})
}
