package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/rflow-dev/rflow/redact"
)

// Log formats (--log-format). Unset, `rflow start` shows the live view on
// a terminal and text logs otherwise.
const (
	logFormatText = "text"
	logFormatJSON = "json"
)

func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:    "log-level",
			Usage:   "debug, info, warn or error",
			Value:   "info",
			EnvVars: []string{"RFLOW_LOG_LEVEL"},
		},
		&cli.StringFlag{
			Name:    "log-format",
			Usage:   "text or json (default: the live view on a terminal, else text)",
			EnvVars: []string{"RFLOW_LOG_FORMAT"},
		},
	}
}

// checkLogFlags makes a mistyped --log-level or --log-format a usage error
// rather than a silent default.
func checkLogFlags(c *cli.Context) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return usagef("--log-level %q: use debug, info, warn or error", c.String("log-level"))
	}
	switch f := c.String("log-format"); f {
	case "", logFormatText, logFormatJSON:
	default:
		return usagef("--log-format %q: use text or json", f)
	}
	return nil
}

// newLogger logs at --log-level in --log-format to stderr.
func newLogger(c *cli.Context) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.String("log-level"))) // checked by checkLogFlags
	return logger(c.App.ErrWriter, c.String("log-format"), level)
}

// viewLogger is the logger beside a live view: warnings and errors only,
// unless --log-level is given, so the view stays readable.
func viewLogger(c *cli.Context, w io.Writer) *slog.Logger {
	level := slog.LevelWarn
	if c.IsSet("log-level") {
		_ = level.UnmarshalText([]byte(c.String("log-level"))) // checked by checkLogFlags
	}
	return logger(w, c.String("log-format"), level)
}

// liveLogger is the logger beside a live view: viewLogger's, writing above
// the view's status panel, muted during a database outage, and without the
// warnings the view prints as lines of its own (reorgs, on_reorg).
func liveLogger(c *cli.Context, v *devView, o *dbOutage) *slog.Logger {
	l := viewLogger(c, v.logWriter(c.App.ErrWriter))
	return slog.New(o.handler(shownHandler{next: l.Handler()}))
}

// shownByView are the messages of warnings the live view shows as lines
// of its own (liveview_reorg.go), from the reorg's record in the database.
var shownByView = map[string]bool{
	"reorg": true,
	"orphaned run stopped; on_reorg response started":                                               true,
	"orphaned log re-included after its reorg was decided; the stopped run goes on":                 true,
	"orphaned log re-included after its reorg was decided; the stopped run is not resumed":          true,
	"orphaned log re-included after its reorg was decided; the run had finished and stays as it is": true,
}

// shownHandler drops the records the live view shows itself.
type shownHandler struct{ next slog.Handler }

func (h shownHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h shownHandler) Handle(ctx context.Context, r slog.Record) error {
	if shownByView[r.Message] {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h shownHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return shownHandler{next: h.next.WithAttrs(as)}
}

func (h shownHandler) WithGroup(name string) slog.Handler {
	return shownHandler{next: h.next.WithGroup(name)}
}

func logger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == logFormatJSON {
		h = slog.NewJSONHandler(w, opts)
	}
	// Every line goes through redact: River, pgx and the chain client log
	// errors that may repeat a URL with its credentials.
	return slog.New(redact.Handler(quietRiver(h)))
}

// liveViewWanted reports whether `rflow start` shows the live view: no
// --log-format was asked for and stdout is a terminal.
func liveViewWanted(c *cli.Context) bool {
	return c.String("log-format") == "" && isTerminal(c.App.Writer)
}

// isTerminal reports whether w is a terminal. Being a character device is
// not enough: /dev/null is one, and `rflow start >/dev/null` (a service
// manager's default) ran the live view, whose poll reads the journal of
// every unfinished run among the newest 100 three times a second.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// quietRiver moves River's own info lines ("River client started", its
// producer's job counts, leader elections) to debug: they are River's
// business, not the operator's. River's logger is the engine's logger with
// component=river (jobs.NewEngine), which is how they are told apart; its
// warnings and errors keep their level.
func quietRiver(h slog.Handler) slog.Handler { return riverHandler{next: h} }

type riverHandler struct {
	next  slog.Handler
	river bool // this handler's attributes say component=river
}

func (h riverHandler) level(l slog.Level) slog.Level {
	if h.river && l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h riverHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, h.level(l))
}

func (h riverHandler) Handle(ctx context.Context, r slog.Record) error {
	l := h.level(r.Level)
	if h.river && l > slog.LevelDebug && cancelled(r) {
		// River reports work cut short by our own shutdown (a job insert
		// notification whose context ended) as an error; nothing was lost.
		l = slog.LevelDebug
	}
	if l != r.Level {
		if !h.next.Enabled(ctx, l) {
			return nil
		}
		r = r.Clone()
		r.Level = l
	}
	return h.next.Handle(ctx, r)
}

// cancelled reports whether r's err attribute is a cancelled context.
func cancelled(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" && a.Key != "error" {
			return true
		}
		if err, ok := a.Value.Any().(error); ok {
			found = errors.Is(err, context.Canceled)
		} else {
			found = a.Value.String() == context.Canceled.Error()
		}
		return !found
	})
	return found
}

func (h riverHandler) WithAttrs(as []slog.Attr) slog.Handler {
	river := h.river
	for _, a := range as {
		if a.Key == "component" && strings.EqualFold(a.Value.String(), "river") {
			river = true
		}
	}
	return riverHandler{next: h.next.WithAttrs(as), river: river}
}

func (h riverHandler) WithGroup(name string) slog.Handler {
	return riverHandler{next: h.next.WithGroup(name), river: h.river}
}
