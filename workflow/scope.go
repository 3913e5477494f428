package workflow

import (
	"maps"
	"slices"

	"github.com/rflow-dev/rflow/trigger"
)

// Expression scopes. Trigger conditions (where, when, idempotency_key) see
// only the trigger's data and env; steps also see run and steps; foreach
// bodies add item and index; a wait_for condition sees the awaited event as
// event (the trigger's stays at trigger.event).

var runT = objectT("run", map[string]*typ{"id": stringT, "workflow": stringT, "attempt": intT, "generation": intT})

// headersT is a webhook's request headers (lower-cased names).
var headersT = mapT(stringT)

func absentReasons() map[string]string {
	return map[string]string{
		"event":   "event is only available with an event trigger (and in a wait_for event's where)",
		"result":  "result is only available with a read trigger",
		"headers": "headers is only available with a webhook trigger",
		"body":    "body is only available with a webhook trigger",
		"item":    "item is only available inside a foreach step's steps",
		"index":   "index is only available inside a foreach step's steps",
		"steps":   "steps is not available in trigger conditions (no step has run yet)",
		"run":     "run is not available in trigger conditions (the run does not exist yet)",
		"reorg":   "reorg is only available in on_reorg steps",
	}
}

// triggerObject describes the trigger variable for the workflow's kind.
func triggerObject(ctx *wfCtx) *typ {
	fields := map[string]*typ{"key": stringT, "kind": stringT}
	switch ctx.w.Trigger.Kind {
	case trigger.Event:
		fields["event"] = orAny(ctx.eventT)
		fields["block"] = intT
		fields["phase"] = stringT
	case trigger.Cron:
		fields["tick"] = stringT
	case trigger.Block:
		fields["block"] = intT
		fields["block_hash"] = hashT
	case trigger.Read:
		fields["block"] = intT
		fields["block_hash"] = hashT
		fields["tick"] = stringT
		fields["result"] = orAny(ctx.resultT)
	case trigger.Webhook:
		fields["headers"] = headersT
		fields["body"] = anyT
	case trigger.Manual:
		fields["input"] = anyT
	case "":
		return anyT // the trigger itself is broken; do not cascade errors
	}
	return objectT("trigger", fields)
}

// TriggerVars lists the fields of the trigger variable that steps of a
// workflow with trigger kind k see: what trigger's payload builders must
// produce (besides key and kind, which the engine adds).
func TriggerVars(k trigger.Kind) []string {
	t := triggerObject(&wfCtx{w: &Workflow{Trigger: Trigger{Kind: k}}})
	out := make([]string, 0, len(t.fields))
	for f := range t.fields {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

func orAny(t *typ) *typ {
	if t == nil {
		return anyT
	}
	return t
}

// triggerScope is the scope of the trigger's own conditions (where, when,
// idempotency_key): they run before a run exists, so they see only the
// occurrence's data and env.
func triggerScope(ctx *wfCtx) *scope {
	sc := &scope{vars: map[string]*typ{"env": ctx.envT}, absent: absentReasons()}
	sc.absent["trigger"] = "trigger is not available in trigger conditions; use " + conditionVars(ctx.w.Trigger.Kind)
	addTriggerVars(ctx, sc)
	return sc
}

func conditionVars(kind trigger.Kind) string {
	switch kind {
	case trigger.Event:
		return "event"
	case trigger.Read:
		return "result"
	case trigger.Webhook:
		return "headers and body"
	}
	return "env"
}

// envScope is the scope of values computed once when triggers start (the
// arguments of a read trigger's call): only env.
func envScope(ctx *wfCtx) *scope {
	sc := &scope{vars: map[string]*typ{"env": ctx.envT}, absent: absentReasons()}
	for _, v := range []string{"trigger", "event", "result", "headers", "body"} {
		sc.absent[v] = v + " is not available here: read arguments are evaluated once, before any call (use env or literals)"
	}
	return sc
}

func addTriggerVars(ctx *wfCtx, sc *scope) {
	switch ctx.w.Trigger.Kind {
	case trigger.Event:
		sc.vars["event"] = orAny(ctx.eventT)
	case trigger.Read:
		sc.vars["result"] = orAny(ctx.resultT)
	case trigger.Webhook:
		sc.vars["headers"] = headersT
		sc.vars["body"] = anyT
	case "":
		// Unknown trigger: allow its variables untyped to avoid cascades.
		for _, v := range []string{"event", "result", "headers", "body"} {
			sc.vars[v] = anyT
		}
	}
	for v := range sc.vars {
		delete(sc.absent, v)
	}
}

// stepScope is the scope of top-level steps, finally and on_reorg.
func stepScope(ctx *wfCtx) *scope {
	steps := map[string]*typ{}
	for id := range ctx.ids {
		steps[id] = objectT("step "+id, map[string]*typ{"output": anyT, "status": stringT})
	}
	sc := &scope{vars: map[string]*typ{
		"env": ctx.envT, "trigger": triggerObject(ctx), "run": runT, "steps": objectT("steps", steps),
	}, absent: absentReasons()}
	addTriggerVars(ctx, sc)
	delete(sc.absent, "steps")
	delete(sc.absent, "run")
	return sc
}

// reorgT is what on_reorg steps see of the reorg that orphaned their run's
// log; run_status is the run's status once it was stopped.
var reorgT = objectT("reorg", map[string]*typ{"chain_id": intT, "fork_block": intT, "depth": intT,
	"old_hash": hashT, "new_hash": hashT, "run_status": stringT})

// reorgScope is the scope of on_reorg steps: the steps' scope (steps.<id>
// are the orphaned run's, as it stood when it was stopped) plus reorg.
func reorgScope(base *scope) *scope {
	out := &scope{vars: maps.Clone(base.vars), absent: maps.Clone(base.absent)}
	out.vars["reorg"] = reorgT
	delete(out.absent, "reorg")
	return out
}

// waitScope is the scope of a wait_for event's where: event is the awaited
// event.
func waitScope(base *scope, ev *typ) *scope {
	out := &scope{vars: maps.Clone(base.vars), absent: maps.Clone(base.absent)}
	out.vars["event"] = ev
	delete(out.absent, "event")
	return out
}
