package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
)

// settleFailed records a known failure of an attempt whose effect happened
// but whose outcome could not be committed (cause): Postgres refused the
// output, a constraint or a trigger failed, the connection broke. Returning
// cause to River would run the job again, and with it the effect, up to
// River's 1000 attempts; recorded as a failure of the attempt, the effect
// runs again only as the step's retry policy allows (a new attempt after
// its backoff), and otherwise the step and its run fail visibly.
//
// The failure is settled from a freshly loaded journal (the failed settle
// may have changed the advance it used). When that write fails too, Postgres
// is unreachable and cause goes back to River: that is the crash window
// between an effect and its outcome, which the reliability contract allows.
func (e *Engine) settleFailed(ctx context.Context, job *river.Job[StepArgs], o outcome, cause error) (outcome, error) {
	if ctx.Err() != nil {
		return o, cause
	}
	run, journal, step, err := e.loadStep(ctx, job.Args, 0)
	if err != nil {
		return o, errors.Join(cause, err)
	}
	if step == nil {
		return o, nil // another worker settled it meanwhile
	}
	a, at, err := e.locate(ctx, e.pool, run, journal, step)
	if err != nil {
		return o, errors.Join(cause, err)
	}
	failed := outcome{
		err:       fmt.Errorf("the attempt's outcome could not be stored, so it counts as a failed attempt: %w", cause),
		retryable: true,
		started:   o.started,
	}
	if err := e.settle(ctx, job, a, at, failed); err != nil {
		return o, errors.Join(cause, err)
	}
	e.logger.WarnContext(ctx, "step outcome could not be stored; recorded as a failed attempt",
		"run", run.ID, "step", step.Key, "attempt", step.Attempt, "err", cause)
	return failed, nil
}
