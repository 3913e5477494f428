package store

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// LocalState is what Supervise reports about the server it owns.
type LocalState string

const (
	// LocalDown: the server exited without being asked to.
	LocalDown LocalState = "down"
	// LocalRestarting: an attempt to start it again begins.
	LocalRestarting LocalState = "restarting"
	// LocalBack: it accepts connections again.
	LocalBack LocalState = "back"
)

// LocalEvent is one change of the supervised server's state.
type LocalEvent struct {
	State LocalState
	// Attempt counts restarts of this outage (LocalRestarting, LocalBack)
	// out of Attempts.
	Attempt, Attempts int
	// Pid is the new postmaster's (LocalBack).
	Pid int
	// Err is why it went down or why the last attempt failed.
	Err error
}

// SuperviseOptions bounds Supervise's restarts.
type SuperviseOptions struct {
	// Attempts is how many restarts one outage gets (0: 6).
	Attempts int
	// Backoff is the wait before the first restart, doubled before each
	// next one up to MaxBackoff (0: 250ms and 4s).
	Backoff, MaxBackoff time.Duration
	// OnEvent is told every state change (nil: nobody).
	OnEvent func(LocalEvent)
}

// ErrLocalGone is returned by Supervise when a server that died could not
// be started again within its attempts.
var ErrLocalGone = errors.New("embedded postgres is down and did not come back")

// Supervise watches the server this process started until ctx ends or
// Stop is called, and starts it again on the same port and data when it
// exits on its own (killed, crashed): an embedded database is this
// process's to keep up. Each outage gets bounded restarts with backoff;
// when they all fail Supervise returns an error wrapping ErrLocalGone and
// the last attempt's reason. A server another process runs (Attached) is
// not supervised.
func (lp *LocalPostgres) Supervise(ctx context.Context, o SuperviseOptions) error {
	if lp.Attached() {
		return nil
	}
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.Backoff <= 0 {
		o.Backoff = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 4 * time.Second
	}
	tell := func(e LocalEvent) {
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	for {
		lp.mu.Lock()
		cmd, exited := lp.cmd, lp.exited
		lp.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-exited:
		}
		if lp.isStopping() || ctx.Err() != nil {
			return nil
		}
		// The exit status, not the log: its last line is a backend's
		// farewell ("unexpected postmaster exit"), not the cause.
		tell(LocalEvent{State: LocalDown, Err: errors.New(cmd.ProcessState.String())})
		if err := lp.comeBack(ctx, cmd.Process.Pid, o, tell); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// comeBack restarts the server that exited (its postmaster was dead),
// up to o.Attempts times.
func (lp *LocalPostgres) comeBack(ctx context.Context, deadPid int, o SuperviseOptions, tell func(LocalEvent)) error {
	lp.mu.Lock()
	if lp.logf != nil {
		lp.logf.Close()
	}
	lp.mu.Unlock()
	// Backends of the dead postmaster (its process group) hold its shared
	// memory: a new postmaster refuses to start while any is alive.
	reapGroup(deadPid)
	wait := o.Backoff
	var last error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, o.MaxBackoff)
		if lp.isStopping() {
			return nil
		}
		tell(LocalEvent{State: LocalRestarting, Attempt: attempt, Attempts: o.Attempts})
		if last = lp.start(lp.runAs, lp.ephemeral); last == nil {
			if last = lp.waitReady(ctx, 30*time.Second); last == nil {
				tell(LocalEvent{State: LocalBack, Attempt: attempt, Attempts: o.Attempts, Pid: lp.Pid()})
				return nil
			}
			lp.killCurrent()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return fmt.Errorf("%w after %d restarts: %v", ErrLocalGone, o.Attempts, last)
}

// killCurrent ends a server that started but never became ready, and its
// log.
func (lp *LocalPostgres) killCurrent() {
	lp.mu.Lock()
	cmd, exited, logf := lp.cmd, lp.exited, lp.logf
	lp.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	logf.Close()
	reapGroup(cmd.Process.Pid)
}

func (lp *LocalPostgres) isStopping() bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.stopping
}

// reapGroup kills what is left of the process group a postmaster led
// (it was started with Setpgid) and waits, briefly, until it is gone.
func reapGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for range 100 {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
