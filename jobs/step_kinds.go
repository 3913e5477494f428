package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// stepKind is how the engine executes one kind of step. A pure kind is
// evaluated inline by advance.runFrom, in the transaction that reached it,
// and costs no commit of its own. An effect kind does something outside
// Postgres, so its row and attempt are journaled first and the step worker
// performs it as a River job of its own.
type stepKind struct {
	// effect marks a kind performed by the step worker.
	effect bool
	// arrive is what runFrom does on reaching a step of this kind (after
	// its if: held). For a pure kind it is the whole evaluation; for an
	// effect kind it is how the step is parked, and nil means queued for
	// its job at once. It returns where the thread goes next, nil when it
	// stops here.
	arrive func(a *advance, ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error)
	// exec performs one attempt of an effect kind in the step worker; nil
	// for a kind this version cannot execute yet.
	exec func(e *Engine, ctx context.Context, x *attempt) (outcome, error)
	// timeout is how long an effect itself may take (River's job timeout
	// is derived from it, see step_timeout.go); nil for kinds that only
	// touch the database (a send hands its transaction to the relayer; a
	// delay snoozes).
	timeout func(s *workflow.Step) time.Duration
	// inline marks an effect that the job of the step before it may carry
	// (step_carry.go): one done in process, within its timeout, that
	// neither parks nor hands its work to anything else.
	inline bool
}

// stepKinds is the table of every step kind the engine knows. Adding a kind
// means a row here, a file with its executor (step_<kind>.go) and the
// workflow parser. Each engine keeps its own copy (Engine.kinds): no
// package-level state.
func stepKinds() map[string]stepKind {
	return map[string]stepKind{
		workflow.StepGoto:    {arrive: (*advance).arriveGoto},
		workflow.StepFail:    {arrive: (*advance).arriveFail},
		workflow.StepNoop:    {arrive: (*advance).arriveNoop},
		workflow.StepForeach: {arrive: (*advance).arriveForeach},

		workflow.StepHTTPCall: {effect: true, exec: (*Engine).execHTTP, timeout: httpTimeout, inline: true},
		workflow.StepNotify:   {effect: true, exec: (*Engine).execHTTP, timeout: notifyStepTimeout, inline: true},
		workflow.StepSend:     {effect: true, exec: (*Engine).execSend},
		workflow.StepDelay:    {effect: true, arrive: (*advance).arriveDelay, exec: (*Engine).execDelay},
		workflow.StepWaitFor:  {effect: true, arrive: (*advance).arriveWaitFor, exec: (*Engine).execWaitFor},
	}
}

// kindOf returns the table row of a step kind. A kind missing from the
// table is an effect with no executor: it parks, and its job fails the run
// with a clear message.
func (e *Engine) kindOf(kind string) stepKind {
	if k, ok := e.kinds[kind]; ok {
		return k
	}
	return stepKind{effect: true}
}

// isEffect reports whether a step kind has a side effect (and so runs as a
// job of its own) rather than being evaluated inline.
func (e *Engine) isEffect(kind string) bool { return e.kindOf(kind).effect }

// attempt is one execution of an effect step by the step worker.
type attempt struct {
	job  *river.Job[StepArgs]
	run  *store.Run
	step *store.StepRun
	a    *advance
	l    loc
}

// exec runs the executor of x's step kind.
func (e *Engine) exec(ctx context.Context, x *attempt) (outcome, error) {
	k := e.kindOf(x.l.n.step.Kind)
	if k.exec == nil {
		return outcome{err: fmt.Errorf("%s steps are not available in this version of rflow", x.l.n.step.Kind)}, nil
	}
	return k.exec(e, ctx, x)
}

func (a *advance) arriveGoto(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error) {
	a.journal(l, key, store.StepCompleted, mustJSON(map[string]any{"goto": l.n.step.Goto}), nil)
	return a.jumpTo(ctx, tx, l, key, l.n.step.Goto)
}

// jumpTo moves the run from the finished step at l to the top-level step
// id (a goto, a wait_for's on_timeout goto): a new epoch, so the steps
// from there on run again.
func (a *advance) jumpTo(ctx context.Context, tx pgx.Tx, l loc, key, id string) (*loc, error) {
	s := l.n.step
	if l.n.depth > 0 {
		return nil, a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: goto inside foreach is not supported", s.ID))
	}
	target := a.p.nodes[id]
	if target == nil || target.depth > 0 {
		return nil, a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: goto target %q is not a top-level step", s.ID, id))
	}
	a.epoch++
	if a.epoch > a.e.maxJumps {
		return nil, a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: more than %d goto jumps in one run (loop guard)", s.ID, a.e.maxJumps))
	}
	return &loc{n: target}, nil
}

func (a *advance) arriveFail(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error) {
	s := l.n.step
	msg := "failed by step " + s.ID
	if s.Fail != nil {
		env = a.orEnv(env, l)
		if m, err := s.Fail.String(env); err == nil && m != "" {
			msg = m
		} else if err != nil {
			msg = fmt.Sprintf("step %s: %v", s.ID, err)
		}
	}
	return nil, a.fail(ctx, tx, l, key, msg)
}

func (a *advance) arriveNoop(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error) {
	a.journal(l, key, store.StepCompleted, nil, nil)
	return a.after(ctx, tx, l, nil)
}

func (a *advance) arriveForeach(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error) {
	return nil, a.startForeach(ctx, tx, l, key, a.orEnv(env, l))
}
