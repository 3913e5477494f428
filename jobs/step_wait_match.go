package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// MatchTx matches a wait feed's delivery against the parked waits, in the
// transaction that advances the feed's cursor (chain.WaitMatcher). Each log
// finds its candidate waits by index (the wait's match key is one of the
// log's field values, or it has none); a candidate whose where holds is
// armed with the log, the earliest in chain order. Then every armed wait
// whose candidate is confirmations deep under the head settles: its step
// completes with the event and the run moves on, in this transaction.
func (e *Engine) MatchTx(ctx context.Context, tx pgx.Tx, d chain.WaitDelivery) error {
	m := &matcher{e: e, tx: tx, envs: map[int64]workflow.Env{}}
	if len(d.Lookback) > 0 && len(d.LookbackIDs) > 0 {
		ids := make([]int64, len(d.LookbackIDs))
		for i, lb := range d.LookbackIDs {
			ids[i] = lb.ID
		}
		if err := m.match(ctx, d.Feed, d.Lookback, ids); err != nil {
			return err
		}
	}
	if len(d.Logs) > 0 {
		if err := m.match(ctx, d.Feed, d.Logs, nil); err != nil {
			return err
		}
	}
	if len(d.LookbackIDs) > 0 {
		ids := make([]int64, len(d.LookbackIDs))
		for i, lb := range d.LookbackIDs {
			ids[i] = lb.ID
		}
		if err := store.FinishLookbacks(ctx, tx, ids); err != nil {
			return err
		}
	}
	deep, err := store.DeepWaits(ctx, tx, d.Feed, d.Head)
	if err != nil {
		return err
	}
	for _, w := range deep {
		if !e.movesOn(w.Workflow) {
			continue
		}
		v, err := workflow.UnmarshalJSON(w.EventData)
		if err != nil {
			return fmt.Errorf("wait %d event: %w", w.ID, err)
		}
		if err := e.settleWait(ctx, tx, w, store.WaitMatched, d.Head, outcome{output: v}); err != nil {
			return err
		}
	}
	return nil
}

// matcher is one delivery's matching: the expression environment of each
// candidate wait is built once.
type matcher struct {
	e    *Engine
	tx   pgx.Tx
	envs map[int64]workflow.Env
	at   map[int64]stepAt
}

// logKeys are the index keys a log can be found under: "" (waits without
// a key) and field=value for each of its fields.
func logKeys(f map[string]any) []string {
	keys := make([]string, 0, len(f)+1)
	keys = append(keys, "")
	for k, v := range f {
		if iv, ok := workflow.IndexValue(v); ok {
			keys = append(keys, k+"="+iv)
		}
	}
	return keys
}

// match tests logs (in chain order) against their candidate waits (only
// ids, when set).
func (m *matcher) match(ctx context.Context, feed store.WaitFeed, logs []chain.Decoded, ids []int64) error {
	fields := make([]map[string]any, len(logs))
	perLog := make([][]string, len(logs))
	all := map[string]bool{}
	for i, l := range logs {
		fields[i] = l.Fields()
		perLog[i] = logKeys(fields[i])
		for _, k := range perLog[i] {
			all[k] = true
		}
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	cands, err := store.WaitCandidates(ctx, m.tx, feed, keys, ids)
	if err != nil || len(cands) == 0 {
		return err
	}
	byKey := map[string][]*store.Wait{}
	for _, w := range cands {
		if !m.e.movesOn(w.Workflow) {
			continue // left for the engine that owns its run
		}
		byKey[w.MatchKey] = append(byKey[w.MatchKey], w)
	}
	for i, l := range logs {
		for _, k := range perLog[i] {
			for _, w := range byKey[k] {
				if err := m.try(ctx, w, l, fields[i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// try arms w with log l if l is at or after w's from block, earlier than
// w's candidate, and w's where holds for it. A where that cannot be
// evaluated fails the step: no log is ignored silently.
func (m *matcher) try(ctx context.Context, w *store.Wait, l chain.Decoded, fields map[string]any) error {
	block, index := int64(l.Block), int(l.LogIndex)
	if w.Status != store.WaitWaiting && w.Status != store.WaitArmed {
		return nil
	}
	if block < w.FromBlock || (w.CandBlock != nil && (*w.CandBlock < block || (*w.CandBlock == block && *w.CandIndex <= index))) {
		return nil
	}
	if w.Where != nil {
		env, at, ok, err := m.env(ctx, w)
		if err != nil || !ok {
			return err
		}
		env["event"] = fields
		holds, err := at.l.n.step.WaitFor.Event.Where.Bool(env)
		if err != nil {
			w.Status = store.WaitFailed
			return m.e.settleWait(ctx, m.tx, w, store.WaitFailed, 0, outcome{err: fmt.Errorf("wait_for where: %w", err)})
		}
		if !holds {
			return nil
		}
	}
	data, err := l.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode log %s:%d: %w", l.TxHash.Hex(), l.LogIndex, err)
	}
	armed, err := store.ArmWait(ctx, m.tx, w.ID, block, l.BlockHash.Hex(), index, data)
	if err != nil || !armed {
		return err
	}
	hash := l.BlockHash.Hex()
	w.Status, w.CandBlock, w.CandIndex, w.CandHash = store.WaitArmed, &block, &index, &hash
	return nil
}

// env returns the expression environment of w's step (the awaited event
// is added by the caller). ok is false when the wait's run or step moved
// on (it is then left to the paths that end it).
func (m *matcher) env(ctx context.Context, w *store.Wait) (workflow.Env, stepAt, bool, error) {
	if m.at == nil {
		m.at = map[int64]stepAt{}
	}
	if env, ok := m.envs[w.ID]; ok {
		return env, m.at[w.ID], true, nil
	}
	run, journal, err := store.RunWithSteps(ctx, m.tx, w.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, stepAt{}, false, nil
	}
	if err != nil {
		return nil, stepAt{}, false, err
	}
	step := findStep(journal, w.StepKey)
	if run.Status.Terminal() || !waitsOn(step, w) {
		return nil, stepAt{}, false, nil
	}
	a, at, err := m.e.locate(ctx, m.tx, run, journal, step)
	if err != nil {
		return nil, stepAt{}, false, err
	}
	env := a.env(at.l)
	m.envs[w.ID], m.at[w.ID] = env, at
	return env, at, true, nil
}

// settleWait ends w as status and resumes its run with o, in tx: the
// run's lock first, then the wait's fenced move out of waiting/armed (a
// racing timeout or cancel that got there first makes this a no-op), then
// the step's outcome and the run's next steps. A run or step that moved on
// cancels the wait instead. Its writes go in a savepoint, so a fenced
// write rolls back only them and the feed's range still commits.
func (e *Engine) settleWait(ctx context.Context, tx pgx.Tx, w *store.Wait, status store.WaitStatus, head int64, o outcome) error {
	run, err := store.GetRun(ctx, tx, w.RunID, true)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	journal, err := store.RunSteps(ctx, tx, run.ID)
	if err != nil {
		return err
	}
	step := findStep(journal, w.StepKey)
	if run.Status.Terminal() || !waitsOn(step, w) {
		_, err := store.EndWait(ctx, tx, w.ID, store.WaitCancelled, 0)
		return err
	}
	a, at, err := e.locate(ctx, tx, run, journal, step)
	if err != nil {
		return fmt.Errorf("wait %d: %w", w.ID, err)
	}
	if run.Error != nil && at.l.n.section == sectionSteps {
		status, o = store.WaitCancelled, outcome{abandon: true}
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	ended, err := store.EndWait(ctx, sp, w.ID, status, head)
	if err != nil || !ended {
		_ = sp.Rollback(ctx)
		return err
	}
	if a.status == store.RunWaitingEvent {
		a.status = store.RunRunning
	}
	ok, err := e.resumeAt(ctx, sp, a, o, at)
	if err != nil || !ok {
		_ = sp.Rollback(ctx)
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return err
	}
	e.faults.Hit(FaultAfterWaitSettle)
	return nil
}

// waitsOn reports whether step is still the attempt w belongs to and
// unfinished: parked (waiting) or, after `runs retry`, queued at the
// attempt its job parks.
func waitsOn(step *store.StepRun, w *store.Wait) bool {
	if step == nil || step.Attempt != w.Attempt {
		return false
	}
	switch step.Status {
	case store.StepWaiting, store.StepQueued, store.StepRetrying:
		return true
	}
	return false
}
