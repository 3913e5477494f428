// Package console is rflow's run console: server-rendered HTML pages under
// /ui/ to browse runs (a timeline and the step journal, linked to River UI
// and the network's explorer), retry dead-lettered runs, decide approvals,
// read a workflow's deployed definition, start a run of it, and pause or
// resume workflows. Its one script (static/console.js) refreshes the
// regions of a page marked data-live from a fresh GET of the page, so the
// pages update themselves; without it every page works as it is.
//
// A person logs in with an API token (RFLOW_API_TOKEN or one of the
// project's api: tokens:); the console then keeps an opaque session id in
// an HttpOnly, SameSite=Strict cookie (the token never leaves the login
// request) and shows what the token's roles allow: pages need read, the
// retry, pause and resume buttons operate, approve and reject approve. Every POST carries the session's CSRF token in a
// hidden field and must come from the console's own origin. A button that
// changes state sends the same command as the /v1 API, through the API's
// own handler and idempotency ledger, under a key rendered into its form,
// so a double submit is one mutation.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// RiverUIPrefix is where the server mounts River UI, which accepts the
// console's session.
const RiverUIPrefix = "/riverui"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Engine is what the console needs from the workflow engine (*jobs.Engine)
// beyond the command API.
type Engine interface {
	// Namespace is the project's share of the database: the console shows
	// and acts on its workflows only, under their local names.
	Namespace() store.Namespace
	// Workflow is a workflow's current compiled definition: its page
	// offers a run form when the trigger is manual or a webhook.
	Workflow(ctx context.Context, name string) (*workflow.Workflow, error)
}

// Config configures a Console.
type Config struct {
	Pool   *pgxpool.Pool
	Engine Engine
	// Commands is the /v1 command API (server's handler). Every button
	// that acts (retry, cancel, pause, resume, run, approve) is a command
	// through it, so the console and the API are one command with one
	// ledger and one set of checks.
	Commands http.Handler
	// Keyring holds the tokens a person may log in with; without any the
	// console is disabled (every page says how to enable it).
	Keyring *access.Keyring
	// Proxies are the trusted reverse proxies: behind one that says
	// X-Forwarded-Proto: https the session cookie is Secure, and the login
	// throttle counts the client it names.
	Proxies *access.Proxies
	// RiverUI says River UI is mounted at RiverUIPrefix: the console links
	// to it, and a login may return there.
	RiverUI bool
	// Networks are the project's networks: where one declares an
	// explorer:, the run page links its transactions and blocks there.
	Networks []*workflow.Network
	Logger   *slog.Logger
	// SessionTTL is how long a login lasts (default 12h).
	SessionTTL time.Duration
	// Sessions, when set, is the table of logins to use (NewSessions):
	// one shared with earlier consoles of the process keeps their logins;
	// SessionTTL is then the table's.
	Sessions *Sessions
	// LoopbackLogin lets a browser on this machine in without a login, as
	// the full-access token (rflow dev on a loopback address): see
	// loopbackSession. Everywhere else the console asks for a token.
	LoopbackLogin bool
}

// Console serves the /ui/ pages. Create it with New.
type Console struct {
	cfg      Config
	logger   *slog.Logger
	pages    map[string]*template.Template
	sessions *sessions
	throttle *access.Throttle
	handler  http.Handler
}

// New builds a Console.
func New(cfg Config) (*Console, error) {
	if cfg.Pool == nil || cfg.Engine == nil || cfg.Commands == nil {
		return nil, errors.New("console: a pool, an engine and the command API are required")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = defaultSessionTTL
	}
	if cfg.Sessions == nil {
		cfg.Sessions = newSessions(cfg.SessionTTL)
	}
	cfg.SessionTTL = cfg.Sessions.ttl // the cookie lasts as long as the login
	c := &Console{cfg: cfg, logger: cfg.Logger, sessions: cfg.Sessions, throttle: access.NewThrottle()}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", noListing(http.FileServerFS(static))))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.Handle("POST /ui/logout", c.mutation("", c.logout))
	mux.Handle("GET /ui/{$}", c.page(c.runsPage))
	mux.Handle("GET /ui/runs/{id}", c.page(c.runPage))
	mux.Handle("GET /ui/dlq", c.page(c.dlqPage))
	mux.Handle("GET /ui/workflows", c.page(c.workflowsPage))
	mux.Handle("GET /ui/workflows/{name}", c.page(c.workflowPage))
	mux.Handle("POST /ui/workflows/{name}/run", c.mutation(workflow.RoleOperate, c.runIt))
	mux.Handle("POST /ui/runs/{id}/retry", c.mutation(workflow.RoleOperate, c.retry))
	mux.Handle("POST /ui/runs/{id}/cancel", c.mutation(workflow.RoleOperate, c.cancel))
	mux.Handle("GET /ui/approvals", c.page(c.approvalsPage))
	mux.Handle("POST /ui/approvals/{id}/approve", c.mutation(workflow.RoleApprove, c.decide("approve")))
	mux.Handle("POST /ui/approvals/{id}/reject", c.mutation(workflow.RoleApprove, c.decide("reject")))
	mux.Handle("POST /ui/workflows/{name}/pause", c.mutation(workflow.RoleOperate, c.pause))
	mux.Handle("POST /ui/workflows/{name}/resume", c.mutation(workflow.RoleOperate, c.resume))
	mux.Handle("/ui/", c.page(func(w http.ResponseWriter, r *http.Request, _ *session) {
		c.render(w, r, http.StatusNotFound, "error", nil, view{"Message": "There is no console page at " + r.URL.Path + "."})
	}))
	// Cross-origin browser POSTs (by Sec-Fetch-Site or Origin) are refused
	// before any handler runs; the CSRF token covers browsers that send
	// neither header.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusForbidden, "error", nil, view{"Message": "Cross-origin request refused."})
	}))
	c.handler = securityHeaders(cop.Handler(mux))
	return c, nil
}

// ServeHTTP serves everything under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// noListing answers 404 for a directory of the static files: their names
// are nobody's business, and a listing is a page without the console's
// headers.
func noListing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// securityHeaders keeps the pages out of frames and other origins' reach.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
