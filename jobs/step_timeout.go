package jobs

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// notifyTimeout bounds a notify step's request (it has no timeout field).
const notifyTimeout = 10 * time.Second

// Defaults of the River timeouts the engine sets (see Config).
const (
	defaultJobTimeout  = 2 * time.Minute
	defaultRescueAfter = 5 * time.Minute
	defaultNodeGrace   = 10 * time.Second
)

// httpTimeout is an http_call's own timeout (its timeout:, or the default).
func httpTimeout(s *workflow.Step) time.Duration {
	if s.HTTPCall.Timeout > 0 {
		return s.HTTPCall.Timeout
	}
	return workflow.DefaultHTTPTimeout
}

func notifyStepTimeout(*workflow.Step) time.Duration { return notifyTimeout }

// stepJobTimeout is River's timeout for a job of step s: the step's own
// timeout plus the job timeout for the journal work around it. River must
// never cancel a step before the step's own timeout does, or the attempt
// ends with no outcome journaled and the job re-fires with the step's
// retry policy never consulted.
func (e *Engine) stepJobTimeout(s *workflow.Step) time.Duration {
	var own time.Duration
	if t := e.kindOf(s.Kind).timeout; t != nil {
		own = t(s)
	}
	return own + e.jobTimeout
}

// longestStepJob is the longest step job timeout of a project's workflows:
// River's stuck-job rescuer must wait at least that long before it takes a
// running job for a stuck one.
func (e *Engine) longestStepJob(p *workflow.Project) time.Duration {
	longest := e.jobTimeout
	var walk func([]*workflow.Step)
	walk = func(list []*workflow.Step) {
		for _, s := range list {
			longest = max(longest, e.stepJobTimeout(s))
			if s.Foreach != nil {
				walk(s.Foreach.Steps)
			}
		}
	}
	for _, wf := range p.Workflows {
		walk(wf.Steps)
		walk(wf.Finally)
		walk(wf.OnReorg)
	}
	return longest
}

// Timeout gives each step job its step's own timeout plus a margin (River
// calls it before Work). The step is found in the cached plans of the
// job's generation; a job of a plan this process has not compiled yet
// loads its run to compile it (Work then finds it cached).
func (w *stepWorker) Timeout(job *river.Job[StepArgs]) time.Duration {
	e := w.e
	id, _, _, err := parseKey(job.Args.StepKey)
	if err != nil {
		return e.jobTimeout
	}
	if d, ok := e.cachedStepJobTimeout(id, job.Args.Generation); ok {
		return e.carrierTimeout(e.checkRescue(d))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if run, err := store.GetRun(ctx, e.pool, job.Args.RunID, false); err == nil {
		if p, err := e.plan(ctx, e.pool, run.Workflow, job.Args.Generation); err == nil {
			if n := p.nodes[id]; n != nil {
				return e.carrierTimeout(e.checkRescue(e.stepJobTimeout(n.step)))
			}
		}
	}
	// The run is gone (Work will find out) or the database is unreachable
	// (Work will fail and be retried): the longest timeout is the safe one.
	return e.rescueAfter
}

// cachedStepJobTimeout looks step id up in the compiled plans of
// generation. Generations are per workflow, so several may match: the
// longest of their timeouts is never shorter than the step's own.
func (e *Engine) cachedStepJobTimeout(id string, generation int64) (time.Duration, bool) {
	suffix := "@" + strconv.FormatInt(generation, 10)
	e.plansMu.Lock()
	defer e.plansMu.Unlock()
	var d time.Duration
	found := false
	for key, p := range e.plans {
		if !strings.HasSuffix(key, suffix) {
			continue
		}
		if n := p.nodes[id]; n != nil {
			d, found = max(d, e.stepJobTimeout(n.step)), true
		}
	}
	return d, found
}

// checkRescue warns when a step job may outlive River's stuck-job rescuer,
// which happens only for a workflow deployed through the API with a
// longer step timeout than any in the project this process started with.
func (e *Engine) checkRescue(d time.Duration) time.Duration {
	if d > e.rescueAfter {
		e.logger.Warn("a step's timeout exceeds River's stuck-job rescue delay; restart rflow so it accounts for the deployed workflow",
			"job_timeout", d, "rescue_after", e.rescueAfter)
	}
	return d
}

// carrierTimeout is River's timeout for a step job whose own step's job
// timeout is d. A job that may carry the steps after its own
// (step_carry.go) gets the longest River's stuck-job rescuer allows with a
// job timeout to spare, at least the longest step job of the project
// (rescueAfter is raised to cover it): each step it carries runs under its
// own step's timeout, and a step is carried only while this deadline
// covers that.
func (e *Engine) carrierTimeout(d time.Duration) time.Duration {
	if e.inlineCap == 0 {
		return d
	}
	return max(d, e.rescueAfter-e.jobTimeout)
}
