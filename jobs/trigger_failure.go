package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// A trigger occurrence whose where:/when: condition fails at run time, or
// whose log cannot be decoded, is never dropped: the chain service claims it
// with store.Claim.TriggerError, and its run fails at once, before its
// first step, at the pseudo step "trigger" (in `runs list --failed`, the
// dead letter queue). `runs retry` evaluates the trigger again under the
// workflow's current generation: true starts the run at its first step,
// false completes it with the trigger step skipped, an error fails it again.

// triggerStep is the journal key, id and kind of the pseudo step a run
// fails at when its trigger failed.
const triggerStep = "trigger"

// failTriggers journals, in tx, the runs just claimed for occurrences
// whose trigger failed (msgs[i] is runs[i]'s error) as failed at the
// trigger step.
func (e *Engine) failTriggers(ctx context.Context, tx pgx.Tx, runs []*store.Run, msgs []string) error {
	if len(runs) == 0 {
		return nil
	}
	advs := make([]*advance, len(runs))
	for i, run := range runs {
		a, err := e.newAdvance(nil, run, nil)
		if err != nil {
			return err
		}
		msg, key := msgs[i], triggerStep
		a.newSteps = append(a.newSteps, store.NewStep{Key: key, StepID: key, Kind: key, Status: store.StepFailed, Error: &msg})
		a.status, a.ended, a.errMsg, a.failedStep = store.RunFailed, true, &msg, &key
		advs[i] = a
	}
	_, err := e.flush(ctx, tx, advs, true, nil)
	return err
}

// retryTrigger retries run id if it failed at its trigger; handled is
// false for any other run (RetryRunTx then retries it from its failed
// step).
func (e *Engine) retryTrigger(ctx context.Context, tx pgx.Tx, id uuid.UUID) (run *store.Run, handled bool, err error) {
	r, err := store.GetRun(ctx, tx, id, true)
	if err != nil {
		return nil, false, err
	}
	if r.Status != store.RunFailed || r.FailedStep == nil || *r.FailedStep != triggerStep {
		return nil, false, nil
	}
	run, steps, err := store.ReopenJournal(ctx, tx, store.RunJournal, id)
	if err != nil {
		return nil, true, err
	}
	attempt := steps[0].Attempt
	wf, err := store.GetWorkflow(ctx, tx, run.Workflow)
	if err != nil {
		return nil, true, err
	}
	p, err := e.plan(ctx, tx, run.Workflow, wf.Generation)
	if err != nil {
		return nil, true, err
	}
	payload, ok, condErr := e.recheckTrigger(p.wf, run)
	if condErr == nil {
		if err := store.RepinRun(ctx, tx, id, wf.Generation, payload); err != nil {
			return nil, true, err
		}
		run.Generation, run.Trigger = wf.Generation, payload
	}
	a, err := e.newAdvance(p, run, nil)
	if err != nil {
		return nil, true, err
	}
	w := &store.Writes{}
	switch {
	case condErr != nil:
		msg, key := condErr.Error(), triggerStep
		w.SettleStep(id, triggerStep, attempt, store.StepOutcome{Status: store.StepFailed, Error: &msg})
		a.status, a.ended, a.errMsg, a.failedStep = store.RunFailed, true, &msg, &key
	case !ok:
		out := mustJSON(map[string]any{"skipped": fmt.Sprintf("the trigger condition is false under generation %d: nothing to run", wf.Generation)})
		w.SettleStep(id, triggerStep, attempt, store.StepOutcome{Status: store.StepSkipped, Output: out})
		a.status, a.ended = store.RunCompleted, true
	default:
		out := mustJSON(map[string]any{"generation": wf.Generation})
		w.SettleStep(id, triggerStep, attempt, store.StepOutcome{Status: store.StepCompleted, Output: out})
		if err := a.startRun(ctx, tx); err != nil {
			return nil, true, fmt.Errorf("retry run %s: %w", id, err)
		}
	}
	if ok, err := e.flush(ctx, tx, []*advance{a}, false, w); err != nil || !ok {
		return nil, true, fmt.Errorf("retry run %s: %w", id, orStale(err))
	}
	run, err = store.GetRun(ctx, tx, id, false)
	return run, true, err
}

// recheckTrigger evaluates run's trigger again under wf: it decodes an
// undecodable log again with the contract's ABI and evaluates where:
// (events) or when: (reads). It returns the trigger payload to keep (the
// decoded one when the log decodes now) and whether the condition holds.
func (e *Engine) recheckTrigger(wf *workflow.Workflow, run *store.Run) ([]byte, bool, error) {
	v, err := workflow.UnmarshalJSON(run.Trigger)
	if err != nil {
		return nil, false, fmt.Errorf("trigger payload: %w", err)
	}
	data, _ := v.(map[string]any)
	t := wf.Trigger
	switch {
	case run.TriggerKind == trigger.Event && t.Event != nil:
		payload, fields := run.Trigger, data["event"]
		if _, raw := data["log"]; raw {
			c := e.project.Contract(t.Event.Contract)
			if c == nil || c.ABI == nil {
				return nil, false, fmt.Errorf("trigger: unknown contract %s", t.Event.Contract)
			}
			ev, err := chain.NewEvent(*c.ABI, t.Event.Event)
			if err != nil {
				return nil, false, fmt.Errorf("trigger: %w", err)
			}
			p, err := chain.Redecode(ev, run.Trigger)
			if err != nil {
				return nil, false, err
			}
			if payload, err = p.MarshalJSON(); err != nil {
				return nil, false, fmt.Errorf("trigger payload: %w", err)
			}
			fields = p.Event.(chain.Decoded).Fields() // Redecode returns a decoded log
		}
		if t.Event.Where == nil {
			return payload, true, nil
		}
		m, _ := fields.(map[string]any)
		ok, err := e.where(t.Event.Where)(m)
		if err != nil {
			return nil, false, fmt.Errorf("trigger where: %w", err)
		}
		return payload, ok, nil
	case run.TriggerKind == trigger.Read && t.Read != nil:
		if t.Read.When == nil {
			return run.Trigger, true, nil
		}
		ok, err := e.when(t.Read.When)(data["result"])
		if err != nil {
			return nil, false, fmt.Errorf("trigger when: %w", err)
		}
		return run.Trigger, ok, nil
	}
	return nil, false, errors.New("trigger: the workflow's current generation has no " + string(run.TriggerKind) + " trigger")
}

// where is an event trigger's where: condition as the chain service
// evaluates it. The log is normalised as a journaled payload reads back, so
// the condition sees the same values at the claim and at a retry.
func (e *Engine) where(where *workflow.Expr) func(event map[string]any) (bool, error) {
	return func(event map[string]any) (bool, error) {
		v, err := workflow.Normalize(event)
		if err != nil {
			return false, err
		}
		return where.Bool(workflow.Env{"event": v, "env": e.envVars})
	}
}

// when is a read trigger's when: condition (see where).
func (e *Engine) when(when *workflow.Expr) func(result any) (bool, error) {
	return func(result any) (bool, error) {
		v, err := workflow.Normalize(result)
		if err != nil {
			return false, err
		}
		return when.Bool(workflow.Env{"result": v, "env": e.envVars})
	}
}
