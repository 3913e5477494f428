package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// A rehearsal engine (Config.Rehearsal) runs one session of `rflow replay`:
// its workflow is the live one deployed under the session's namespaced
// name, its claims carry prefixed trigger keys, and all of its jobs live in
// the session's own River queue (stepJob routes them by workflow name,
// whichever process enqueues), which only this engine works.

// queue is the River queue this engine works.
func (e *Engine) queue() string {
	if e.rehearsal != nil {
		return e.rehearsal.Queue()
	}
	return river.QueueDefault
}

// owns reports whether this engine starts work for workflow: a live
// engine only live workflows, a rehearsal engine only its session's.
func (e *Engine) owns(workflow string) bool {
	r, ok := store.ParseRehearsal(workflow)
	if e.rehearsal == nil {
		return !ok
	}
	return ok && r.Kind == e.rehearsal.Kind && r.Session == e.rehearsal.Session
}

// rehearse is wf under its rehearsal name: guards, budgets and breakers
// then count the rehearsal's runs apart from the live workflow's.
func rehearse(wf *workflow.Workflow, name string) *workflow.Workflow {
	c := *wf
	c.Name = name
	return &c
}

// DeployRehearsal deploys wf, a workflow of the project, under the
// rehearsal's name (its spec unchanged) and declares its budgets there,
// so the rehearsal's spend never counts against the live workflow's.
func (e *Engine) DeployRehearsal(ctx context.Context, wf *workflow.Workflow) (store.Deployed, error) {
	if e.rehearsal == nil || e.rehearsal.Workflow != wf.Name {
		return store.Deployed{}, errors.New("deploy rehearsal: the engine is not rehearsing this workflow")
	}
	var d store.Deployed
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		name := e.rehearsal.Name()
		if d, err = store.DeployWorkflow(ctx, tx, name, wf.Hash, wf.Spec); err != nil {
			return err
		}
		return budgets.Declare(ctx, tx, rehearse(wf, name))
	})
	return d, err
}

// rehearsalClaimer claims occurrences for the engine's rehearsal.
type rehearsalClaimer struct{ e *Engine }

// RehearsalClaimer is the chain.Claimer of a rehearsal: claims for the
// rehearsal's workflow pass the claim gate with the session's trigger key
// prefix; a claim for any other workflow is refused, so a rehearsal never
// claims a live run.
func (e *Engine) RehearsalClaimer() interface {
	ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error)
} {
	return rehearsalClaimer{e: e}
}

func (c rehearsalClaimer) ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error) {
	r := c.e.rehearsal
	if r == nil {
		return 0, errors.New("rehearsal claim: the engine runs no rehearsal")
	}
	out := make([]store.Claim, len(claims))
	for i, cl := range claims {
		if cl.Workflow != r.Name() {
			return 0, fmt.Errorf("rehearsal claim: workflow %s is not the rehearsal's (%s)", cl.Workflow, r.Name())
		}
		cl.TriggerKey = r.TriggerKey(cl.TriggerKey)
		out[i] = cl
	}
	return c.e.ClaimTx(ctx, tx, out)
}

// RehearsalChainConfig is the chain configuration a replay reads history
// with: the project's networks and the rehearsal's one event trigger,
// built as live ingestion builds it (where: included), claiming under the
// rehearsal's name. Any other trigger kind is an error naming it.
func (e *Engine) RehearsalChainConfig(wf *workflow.Workflow) (chain.Config, error) {
	if e.rehearsal == nil || e.rehearsal.Workflow != wf.Name {
		return chain.Config{}, errors.New("replay: the engine is not rehearsing this workflow")
	}
	if wf.Trigger.Event == nil {
		return chain.Config{}, fmt.Errorf("workflow %s has a %s trigger: only event triggers can be replayed over a block range",
			wf.Name, wf.Trigger.Kind)
	}
	cfg := e.ChainConfig()
	cfg.Reload, cfg.OnReorg = nil, nil
	var trig chain.Triggers
	if err := e.addChainTrigger(&trig, rehearse(wf, e.rehearsal.Name()), 0); err != nil {
		return chain.Config{}, err
	}
	cfg.Events = trig.Events
	return cfg, nil
}

// adoptSend is the relayer's recovery filter: an engine re-drives only
// the sends of runs it owns (a live engine live runs' and sends made
// outside a run, a rehearsal engine its session's), so a send's job never
// lands in another process's queue.
func (e *Engine) adoptSend(ctx context.Context, tx pgx.Tx, externalID string) (bool, error) {
	ref, ok := parseExternalID(externalID)
	if !ok {
		return e.rehearsal == nil, nil
	}
	// A compensation send's key names its run too: the response belongs to
	// whoever owns the run.
	run, err := store.GetRun(ctx, tx, ref.run, false)
	if errors.Is(err, store.ErrNotFound) {
		return e.rehearsal == nil, nil
	}
	if err != nil {
		return false, err
	}
	return e.owns(run.Workflow), nil
}
