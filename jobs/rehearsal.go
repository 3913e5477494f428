package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/rehearsal"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Rehearsal makes an engine one that runs only namespaced workflows (a
// workflow test's or a replay's, see package rehearsal), apart from every
// live process on the same database:
//
//   - its River jobs live in its own schema (RiverSchema), which no live
//     process fetches from, so no live executor ever works a rehearsal run;
//   - it registers no node, runs no boot recovery, no periodic job and no
//     background release loop, so it never touches a live run, send,
//     budget or job;
//   - its sends go to Send, never to the relayer: no nonce, transaction or
//     budget row is written;
//   - it refuses to plan a live workflow, as a live engine refuses to plan
//     a namespaced one.
type Rehearsal struct {
	// RiverSchema is the rehearsal's own River schema
	// (store.CreateRehearsalRiver).
	RiverSchema string
	// Send is handed each send attempt instead of the relayer; its map is
	// the step's output (tx_id, hash, status, ...). An error fails the
	// attempt as a relayer refusal would.
	Send func(ctx context.Context, s SendCapture) (map[string]any, error)
}

// SendCapture is one send attempt of a rehearsal: the request the relayer
// would have been given, with its run and step.
type SendCapture struct {
	RunID    uuid.UUID
	Workflow string
	StepKey  string
	Step     *workflow.Step
	Request  relayer.Request
}

// execCapturedSend is the send executor of a rehearsal engine: the request
// is evaluated exactly as for the relayer, then handed to Rehearsal.Send.
func (e *Engine) execCapturedSend(ctx context.Context, x *attempt) (outcome, error) {
	req, err := e.sendRequest(x.l.n.step, x.a.env(x.l), externalID(x.run.ID, x.step.Key, x.step.Attempt))
	if err != nil {
		return outcome{err: err}, nil
	}
	out, err := e.rehearsal.Send(ctx, SendCapture{RunID: x.run.ID, Workflow: x.run.Workflow, StepKey: x.step.Key,
		Step: x.l.n.step, Request: req})
	if err != nil {
		return outcome{err: fmt.Errorf("send: %w", err)}, nil
	}
	return outcome{output: out}, nil
}

// checkScope refuses a workflow this engine must never run: a namespaced
// one on a live engine, a live one on a rehearsal engine.
func (e *Engine) checkScope(name string) error {
	switch ns := rehearsal.Namespaced(name); {
	case e.rehearsal == nil && ns:
		return fmt.Errorf("workflow %s belongs to a replay or test, which a live process never runs: %w", name, store.ErrNotFound)
	case e.rehearsal != nil && !ns:
		return fmt.Errorf("workflow %s is live, and a rehearsal never runs a live workflow: %w", name, store.ErrNotFound)
	}
	return nil
}

// rehearsed is the compiled definition a namespaced workflow runs: the
// definition of the workflow it rehearses, renamed to the namespaced name,
// so every guard window, concurrency slot and budget it takes is keyed by
// that name and never by the live workflow's.
func rehearsed(wf *workflow.Workflow, name string) *workflow.Workflow {
	if wf.Name == name {
		return wf
	}
	c := *wf
	c.Name = name
	return &c
}
