package flowtest

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/store"
)

// clock is one test's clock. Its runs' delays, wait_for timeouts and
// approval expiries are persisted deadlines, so the test moves its clock
// by bringing them nearer (store.AdvanceRunTimers): a `delay: 10m` takes
// no ten minutes, and the engine, which reads the real time as a live one
// does, needs no clock of its own. Time the test really takes counts too
// (milliseconds).
type clock struct {
	s *session
	// skip: the test says no advance:, so each timer a run reaches is
	// skipped to at once, as if its deadline had come.
	skip bool
}

// settle waits for a run to finish, or to reach status until (a test may
// expect a run to stay throttled, say). A run parked on a timer is
// skipped ahead to it, or, in a test that moves its clock itself, counts
// as settled while its next deadline lies ahead.
func (c *clock) settle(ctx context.Context, id uuid.UUID, until string) error {
	deadline := time.Now().Add(c.s.opts.Timeout)
	for {
		run, err := store.GetRun(ctx, c.s.opts.Pool, id, false)
		if err != nil {
			return err
		}
		if run.Status.Terminal() || (until != "" && string(run.Status) == until) {
			return nil
		}
		if timed(run.Status) {
			at, ok, err := store.NextRunTimer(ctx, c.s.opts.Pool, id)
			if err != nil {
				return err
			}
			if ahead := time.Until(at); ok && ahead > 0 {
				if !c.skip {
					return nil // parked until the test's clock gets there
				}
				if err := store.AdvanceRunTimers(ctx, c.s.opts.Pool, c.s.schema, id, ahead); err != nil {
					return err
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("run %s is still %s after %s (rflow test --timeout)", id, run.Status, c.s.opts.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// advance moves the clock of every run of the test by d, and settles each
// run that has not finished (run i until until(i)).
func (c *clock) advance(ctx context.Context, runs []uuid.UUID, d time.Duration, until func(int) string) error {
	for _, id := range runs {
		if err := store.AdvanceRunTimers(ctx, c.s.opts.Pool, c.s.schema, id, d); err != nil {
			return err
		}
	}
	for i, id := range runs {
		if err := c.settle(ctx, id, until(i)); err != nil {
			return err
		}
	}
	return nil
}

// timed reports whether a run in status s may be waiting for a deadline.
func timed(s store.RunStatus) bool {
	return s == store.RunWaitingDelay || s == store.RunWaitingEvent || s == store.RunWaitingApproval
}
