package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Rehearsal makes an engine one that runs only rehearsal workflows (a
// replay's or a workflow test's: names of the store.Rehearsal shape), apart
// from every live process on the same database. It never starts a run of
// a live workflow (nor finds one: Engine.Workflow), as a live engine never
// starts a rehearsal's, and it enqueues no periodic job. The options say how it stays apart; each command takes
// what it needs:
//
//	rflow replay: Rehearsal{Rehearsal: one session of one workflow, SkipHTTP: --skip-http}
//	  jobs in the session's own queue of the live River schema, sends
//	  through the engine's relayer in that queue (simulated with
//	  Config.DryRun);
//	rflow test: Rehearsal{Rehearsal: {Kind: test}, RiverSchema: own, Send: capture}
//	  every session (one per test) in a River schema of its own, sends
//	  captured: no relayer, nonce, transaction or budget row is written.
type Rehearsal struct {
	// Rehearsal names the workflows the engine runs: those of Kind, and of
	// Session when it is set, else of every session of Kind (which needs
	// RiverSchema: a session's own queue is then not one queue).
	// Workflow, when set, is the one workflow DeployRehearsal and
	// RehearsalChainConfig accept.
	store.Rehearsal
	// RiverSchema, when set, is the rehearsal's own River schema
	// (store.CreateRehearsalRiver), where all of its jobs live and no live
	// process fetches; Start then does none of a live process's duties
	// (node, recovery, release loop). Unset: the session's own queue in the
	// live schema.
	RiverSchema string
	// Send, when set, is handed each send attempt instead of the relayer;
	// its map is the step's output (tx_id, hash, status, ...). An error
	// fails the attempt as a relayer refusal would.
	Send func(ctx context.Context, s SendCapture) (map[string]any, error)
	// SkipHTTP records http_call and notify steps as skipped instead of
	// making the requests (rflow replay --skip-http).
	SkipHTTP bool
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

// check refuses a rehearsal configuration no engine can keep apart.
func (r *Rehearsal) check() error {
	switch {
	case r == nil:
		return nil
	case r.Kind != store.RehearsalReplay && r.Kind != store.RehearsalTest:
		return fmt.Errorf("engine: rehearsal kind %q: want %s or %s", r.Kind, store.RehearsalReplay, store.RehearsalTest)
	case r.Session == "" && r.RiverSchema == "":
		return errors.New("engine: a rehearsal of every session needs a RiverSchema of its own")
	case r.RiverSchema != "" && r.Send == nil:
		// Its relayer's jobs would go with the schema, and no live
		// process adopts a rehearsal's send: a killed session would leave
		// sends no one drives.
		return errors.New("engine: a rehearsal in a River schema of its own must capture its sends (Send)")
	case r.Session != "":
		return store.ValidSession(r.Session)
	}
	return nil
}

// The options of a rehearsal; a live engine (nil) has none.
func (r *Rehearsal) ownSchema() bool { return r != nil && r.RiverSchema != "" }
func (r *Rehearsal) captures() bool  { return r != nil && r.Send != nil }
func (r *Rehearsal) skipsHTTP() bool { return r != nil && r.SkipHTTP }

// riverSchema is the River schema this engine's client works.
func (e *Engine) riverSchema() string {
	if e.rehearsal.ownSchema() {
		return e.rehearsal.RiverSchema
	}
	return store.RiverSchema
}

// queue is the River queue this engine works: in a rehearsal's own schema
// River's default queue, in the live schema the session's own, and for a
// live engine its project's (store.Namespace.Queue).
func (e *Engine) queue() string {
	switch {
	case e.rehearsal.ownSchema():
		return river.QueueDefault
	case e.rehearsal != nil:
		return e.rehearsal.Queue()
	}
	return e.ns.Queue()
}

// queueOf is the queue the jobs of workflow's runs go to, whoever enqueues
// them: a rehearsal with a schema of its own has one queue for all its
// sessions, elsewhere a rehearsal's jobs go to its session's queue.
func (e *Engine) queueOf(workflow string) string {
	if e.rehearsal.ownSchema() {
		return river.QueueDefault
	}
	return store.QueueOf(workflow)
}

// owns reports whether this engine starts work for workflow: a live
// engine only its project's live workflows, a rehearsal engine only its
// own.
func (e *Engine) owns(workflow string) bool {
	r, ok := store.ParseRehearsal(workflow)
	if e.rehearsal == nil {
		return e.ns.Owns(workflow)
	}
	return ok && r.Kind == e.rehearsal.Kind && (e.rehearsal.Session == "" || r.Session == e.rehearsal.Session)
}

// movesOn reports whether this engine may move a started run of workflow
// on from a wait feed: the run's next job must land in a River schema this
// engine writes and someone works, and the run must be its project's (its
// plan is compiled against this project). A rehearsal in a schema of its
// own (rflow test) moves only its own runs; an engine in the live schema
// moves its project's live runs and replays (their jobs go to the
// session's queue there, stepJob), never a test's, whose jobs no live
// process works.
func (e *Engine) movesOn(workflow string) bool {
	if e.owns(workflow) {
		return true
	}
	if e.rehearsal.ownSchema() {
		return false
	}
	r, ok := store.ParseRehearsal(workflow)
	if !ok {
		return e.ns.Owns(workflow)
	}
	return r.Kind == store.RehearsalReplay && e.ns.Owns(r.Workflow)
}

// scopeError is why an engine refuses to run workflow (see owns), as
// not found: to it, the workflow does not exist.
func (e *Engine) scopeError(name string) error {
	switch {
	case e.rehearsal == nil && !store.IsRehearsal(name):
		return fmt.Errorf("workflow %s is not one of %s's: %w", name, e.ns.Describe(), store.ErrNotFound)
	case e.rehearsal == nil:
		return fmt.Errorf("workflow %s belongs to a replay or test, which a live process never runs: %w", name, store.ErrNotFound)
	case !store.IsRehearsal(name):
		return fmt.Errorf("workflow %s is live, and a rehearsal never runs a live workflow: %w", name, store.ErrNotFound)
	}
	return fmt.Errorf("workflow %s is not one of this engine's rehearsals: %w", name, store.ErrNotFound)
}

// execCapturedSend is the send executor of a rehearsal that captures its
// sends: the request is evaluated exactly as for the relayer, then handed
// to Rehearsal.Send.
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

// rehearse is wf under its rehearsal name: guards, budgets and breakers
// then count the rehearsal's runs apart from the live workflow's.
func rehearse(wf *workflow.Workflow, name string) *workflow.Workflow {
	if wf.Name == name {
		return wf
	}
	c := *wf
	c.Name = name
	return &c
}

// DeployRehearsal deploys wf, a workflow of the project, under the
// rehearsal's name (its spec unchanged) and declares its budgets there,
// so the rehearsal's spend never counts against the live workflow's.
func (e *Engine) DeployRehearsal(ctx context.Context, wf *workflow.Workflow) (store.Deployed, error) {
	if e.rehearsal == nil || e.rehearsal.Workflow != e.ns.Qualify(wf.Name) {
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
		if cl.LegacyKey != "" {
			cl.LegacyKey = r.TriggerKey(cl.LegacyKey)
		}
		out[i] = cl
	}
	return c.e.ClaimTx(ctx, tx, out)
}

// RehearsalChainConfig is the chain configuration a replay reads history
// with: the project's networks and the rehearsal's one event trigger,
// built as live ingestion builds it (where: included), claiming under the
// rehearsal's name. Any other trigger kind is an error naming it.
func (e *Engine) RehearsalChainConfig(wf *workflow.Workflow) (chain.Config, error) {
	if e.rehearsal == nil || e.rehearsal.Workflow != e.ns.Qualify(wf.Name) {
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

// projectSend is the relayer's project filter (relayer.Config.Ours): a
// send is the project's when its run is one of the project's workflows or
// a rehearsal of one; a send made outside a run is the home project's.
func (e *Engine) projectSend(ctx context.Context, tx pgx.Tx, externalID string) (bool, error) {
	ref, ok := parseExternalID(externalID)
	if !ok {
		return e.ns.Home(), nil
	}
	run, err := store.GetRun(ctx, tx, ref.run, false)
	if errors.Is(err, store.ErrNotFound) {
		return e.ns.Home(), nil
	}
	if err != nil {
		return false, err
	}
	name := run.Workflow
	if r, ok := store.ParseRehearsal(name); ok {
		name = r.Workflow
	}
	return e.ns.Owns(name), nil
}

// adoptSend is the relayer's recovery filter: an engine re-drives only
// the sends of runs it owns (a live engine live runs' and sends made
// outside a run, a rehearsal engine its session's), so a send's job never
// lands in another process's queue.
func (e *Engine) adoptSend(ctx context.Context, tx pgx.Tx, externalID string) (bool, error) {
	// A send made outside a run is the home project's: some process must
	// drive it, and only one project's may (its wallet names are that
	// project's).
	ref, ok := parseExternalID(externalID)
	if !ok {
		return e.rehearsal == nil && e.ns.Home(), nil
	}
	// A compensation send's key names its run too: the response belongs to
	// whoever owns the run.
	run, err := store.GetRun(ctx, tx, ref.run, false)
	if errors.Is(err, store.ErrNotFound) {
		return e.rehearsal == nil && e.ns.Home(), nil
	}
	if err != nil {
		return false, err
	}
	return e.owns(run.Workflow), nil
}
