package jobs

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// A run whose first step is a plain delay parks at its claim. Planned
// after the gate, as other runs are, its row is inserted queued and then
// rewritten waiting_delay by a second statement that costs about what the
// insert does (docs/BENCHMARKS.md, "The claim path from outside"). Such a
// run is planned before the gate instead and born parked (store.Birth);
// the gate applies the birth only to the generation it was planned from
// and never to a paused workflow, so a deploy or a pause between the plan
// and the insert only sends the run down the ordinary path.

// planBirths plans, before the gate, the start of each claim whose run
// will be born parked (see bornParked): its births for
// store.ClaimRunsBorn (nil when there are none) and the advances that
// journal and enqueue those runs once they win the gate. It writes
// nothing.
func (e *Engine) planBirths(ctx context.Context, tx pgx.Tx, claims []store.Claim) ([]store.Birth, []*advance) {
	var births []store.Birth
	var advs []*advance
	for i, c := range claims {
		a := e.planBirth(ctx, tx, c)
		if a == nil {
			continue
		}
		if births == nil {
			births, advs = make([]store.Birth, len(claims)), make([]*advance, len(claims))
		}
		births[i] = store.Birth{ID: a.run.ID, Generation: a.run.Generation, Status: a.status, Position: a.position, WakeAt: a.wakeAt}
		advs[i] = a
	}
	return births, advs
}

// planBirth is the started advance of claim c's run when it can be born
// parked, else nil: the ordinary path then plans it after the gate (and
// reports whatever stopped it here, an uncompiled generation say).
func (e *Engine) planBirth(ctx context.Context, tx pgx.Tx, c store.Claim) *advance {
	if c.TriggerError != "" || !e.owns(c.Workflow) {
		return nil
	}
	gen, ok := e.claimedGeneration(c.Workflow)
	if !ok {
		return nil
	}
	p, err := e.plan(ctx, tx, c.Workflow, gen)
	// A guarded workflow's run may be held by its guard (status throttled),
	// which the gate decides after the insert: it is never born parked.
	if err != nil || guarded(p.wf) || !bornParked(p) {
		return nil
	}
	run := &store.Run{ID: uuid.Must(uuid.NewV7()), Workflow: c.Workflow, Generation: gen, Attempt: 1,
		TriggerKey: c.TriggerKey, TriggerKind: c.TriggerKind, Trigger: c.Trigger, Status: store.RunQueued}
	a, err := e.newAdvance(p, run, nil)
	if err != nil {
		return nil
	}
	if err := a.startRun(ctx, tx); err != nil || a.ended || a.errMsg != nil || a.status == store.RunQueued {
		return nil
	}
	a.born = true
	return a
}

// bornParked reports whether every run of p parks at its first step before
// touching the database: a delay of a fixed duration, with no condition.
// Planning it needs neither the run's row nor an expression that could
// fail, so it can be planned before the row exists.
func bornParked(p *plan) bool {
	n := p.first(sectionSteps)
	if n == nil || n.parent != nil {
		return false
	}
	s := n.step
	return s.Kind == workflow.StepDelay && s.If == nil && s.Delay != nil && s.Delay.Until == nil
}

// claimedGeneration is the generation of workflow name that its last won
// claim pinned, the one its next claims most likely pin too.
func (e *Engine) claimedGeneration(name string) (int64, bool) {
	e.plansMu.Lock()
	defer e.plansMu.Unlock()
	gen, ok := e.claimed[name]
	return gen, ok
}

// rememberClaimed records the generations won claims pinned.
func (e *Engine) rememberClaimed(won []store.ClaimedRun) {
	e.plansMu.Lock()
	defer e.plansMu.Unlock()
	for _, w := range won {
		e.claimed[w.Workflow] = w.Generation
	}
}
