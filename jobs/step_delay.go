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

// arriveDelay parks a delay step as waiting, with its job scheduled at the
// wake time: a delay holds no worker while it waits.
func (a *advance) arriveDelay(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) (*loc, error) {
	s := l.n.step
	wake, err := a.wakeTime(s, a.orEnv(env, l))
	if err != nil {
		return nil, a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: %v", s.ID, err))
	}
	a.park(l, key, store.StepWaiting, &wake)
	a.status, a.wakeAt = store.RunWaitingDelay, &wake
	return nil, nil
}

func (a *advance) wakeTime(s *workflow.Step, env workflow.Env) (time.Time, error) {
	if s.Delay == nil {
		return time.Time{}, fmt.Errorf("delay has no duration")
	}
	if s.Delay.Until != nil {
		v, err := s.Delay.Until.Eval(env)
		if err != nil {
			return time.Time{}, err
		}
		switch t := v.(type) {
		case time.Time:
			return t, nil
		case string:
			return time.Parse(time.RFC3339, t)
		default:
			return time.Time{}, fmt.Errorf("until: want an RFC 3339 time, got %T", v)
		}
	}
	return a.now.Add(s.Delay.Duration), nil
}

// execDelay completes a delay whose wake time has come; a job that runs
// early (a rescue, a clock skew) snoozes until then.
func (e *Engine) execDelay(ctx context.Context, x *attempt) (outcome, error) {
	if x.step.WakeAt != nil && time.Until(*x.step.WakeAt) > 0 {
		return outcome{}, river.JobSnooze(time.Until(*x.step.WakeAt))
	}
	return outcome{output: map[string]any{"woke_at": time.Now().UTC().Format(time.RFC3339Nano)}}, nil
}
