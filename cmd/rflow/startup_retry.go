package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rflow-dev/rflow/jobs"
)

// startupAttempts bounds the start-ups of one process that an outage of its
// embedded Postgres may interrupt: as many as the supervisor's restarts of
// one outage.
const startupAttempts = 6

// startupGrace is how long a start-up that lost its database connection
// waits for the supervisor to say whether the server died: the query can
// fail a moment before the supervisor sees the postmaster exit.
const startupGrace = 2 * time.Second

// runEngine is runEngineOnce, whose start-up (everything before the engine
// is up and o.ready is told) is tried again when the embedded Postgres this
// process supervises went down under it: it waits for the supervisor to
// bring the server back (its down, restarting and back lines), says in one
// line that it starts again, and does, at most startupAttempts times in
// all. A start-up that failed for any other reason, or a database of your
// own, ends the process as before; so does the supervisor giving up, with
// its one line. Every start-up step is idempotent (migrations, the
// project's registration, the deploy), so starting again is safe.
func runEngine(ctx context.Context, o engineOptions) error {
	ready := o.ready
	first := o.outage.count()
	for attempt := 1; ; attempt++ {
		up := false
		once := o
		once.ready = func(e *jobs.Engine) {
			up = true
			if ready != nil {
				ready(e)
			}
		}
		seen := o.outage.count()
		err := runEngineOnce(ctx, once)
		if err == nil || up || ctx.Err() != nil {
			return err
		}
		// A connection that lost its server before an outage of this
		// start-up sequence was over can still be idle in the pool and
		// fail the next attempt: that is the same outage.
		if !o.outage.interrupted(ctx, seen, err) && (o.outage.count() == first || !connectionLost(err)) {
			return err
		}
		if attempt == startupAttempts {
			return fmt.Errorf("the embedded postgres went down during each of %d start-ups; stopping: %w", attempt, err)
		}
		if err := o.outage.awaitBack(ctx, o.fatal); err != nil || ctx.Err() != nil {
			return err
		}
		// Connections opened before the server went down are dead; the
		// next attempt opens fresh ones.
		o.db.Pool.Reset()
		o.say(fmt.Sprintf("start-up interrupted: the embedded postgres went down; starting again (attempt %d of %d)",
			attempt+1, startupAttempts))
	}
}

// supervisedOutage is o when db is an embedded Postgres this process
// started (and so supervises), else nil: nobody restarts another's.
func supervisedOutage(db *database, o *dbOutage) *dbOutage {
	if db.Embedded == nil || db.Embedded.Attached() {
		return nil
	}
	return o
}

// count is how many times the server went down so far (0 for nil).
func (o *dbOutage) count() int64 {
	if o == nil {
		return 0
	}
	return o.outages.Load()
}

// interrupted reports whether the server went down since count was seen,
// which is why the start-up failed with err. A lost connection gets
// startupGrace for the supervisor to notice the exit.
func (o *dbOutage) interrupted(ctx context.Context, seen int64, err error) bool {
	if o == nil {
		return false
	}
	if o.down.Load() || o.count() > seen {
		return true
	}
	if !connectionLost(err) {
		return false
	}
	deadline := time.Now().Add(startupGrace)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if o.down.Load() || o.count() > seen {
			return true
		}
	}
	return false
}

// awaitBack waits until the server is up again. It returns the
// supervisor's error when it gave up, nil when the server is back or ctx
// ended.
func (o *dbOutage) awaitBack(ctx context.Context, fatal <-chan error) error {
	for o.down.Load() {
		select {
		case <-ctx.Done():
			return nil
		case err := <-fatal:
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// connectionLost reports whether err is the database connection going
// away (refused, reset, closed, or the server shutting down or starting
// up) rather than an answer.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// connection_exception, and the server shutting down, crashed or
		// starting up (admin_shutdown, crash_shutdown, cannot_connect_now).
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || pgconn.Timeout(err)
}
