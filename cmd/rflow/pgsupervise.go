package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
)

// outageQuiet is how long logs stay muted after the embedded database came
// back: the pool's connections to the dead server fail once each first.
const outageQuiet = 3 * time.Second

// dbOutage mutes the logger and the live view while the embedded Postgres
// this process owns is down: every part of the engine would otherwise log
// each failed query (about 18 lines a second), and the one line per state
// change is what the operator needs.
type dbOutage struct {
	down       atomic.Bool
	quietUntil atomic.Int64 // unix nanoseconds
	// outages counts the times the server went down, so a start-up can
	// tell whether one interrupted it (startupInterrupted).
	outages atomic.Int64
}

// quiet reports whether logs are muted now.
func (o *dbOutage) quiet() bool {
	return o != nil && (o.down.Load() || time.Now().UnixNano() < o.quietUntil.Load())
}

// handler wraps h so that records are dropped while o is quiet.
func (o *dbOutage) handler(h slog.Handler) slog.Handler { return outageHandler{next: h, o: o} }

type outageHandler struct {
	next slog.Handler
	o    *dbOutage
}

func (h outageHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h outageHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.o.quiet() {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h outageHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return outageHandler{next: h.next.WithAttrs(as), o: h.o}
}

func (h outageHandler) WithGroup(name string) slog.Handler {
	return outageHandler{next: h.next.WithGroup(name), o: h.o}
}

// superviseDatabase keeps the embedded Postgres of db up while ctx lasts
// (store.LocalPostgres.Supervise), saying each state change with say. The
// channel receives the one error that ends the process when the server
// cannot be restarted; it never fires for a database of your own.
func superviseDatabase(ctx context.Context, db *database, o *dbOutage, say func(string)) <-chan error {
	fatal := make(chan error, 1)
	if db.Embedded == nil || db.Embedded.Attached() {
		return fatal
	}
	var downAt time.Time
	onEvent := func(e store.LocalEvent) {
		switch e.State {
		case store.LocalDown:
			downAt = time.Now()
			o.down.Store(true)
			o.outages.Add(1)
			say(fmt.Sprintf("postgres down: embedded postgres exited (%v); restarting it", e.Err))
		case store.LocalRestarting:
			say(fmt.Sprintf("postgres restarting (attempt %d of %d)", e.Attempt, e.Attempts))
		case store.LocalBack:
			o.quietUntil.Store(time.Now().Add(outageQuiet).UnixNano())
			o.down.Store(false)
			say(fmt.Sprintf("postgres back: pid %d, down %s; runs go on", e.Pid, time.Since(downAt).Round(100*time.Millisecond)))
		}
	}
	go func() {
		err := db.Embedded.Supervise(ctx, store.SuperviseOptions{OnEvent: onEvent})
		if err != nil {
			fatal <- cli.Exit(fmt.Sprintf("%v; stopping (data in %s)", err, db.Embedded.DataDir()), exitFailure)
		}
	}()
	return fatal
}
