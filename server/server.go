// Package server is rflow's HTTP surface: webhook triggers (POST
// /hooks/{workflow}), the command API under /v1, the run console under /ui/
// (package server/console), River UI at /riverui/, Prometheus metrics at
// /metrics and the health probes.
//
// Every mutation goes through the idempotency ledger (store.ClaimIdempotencyKey):
// the ledger row, the state change and the River job it enqueues commit in
// one transaction, so a repeated request replays the recorded response byte
// for byte and never mutates twice.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Engine is what the server needs from the workflow engine (*jobs.Engine).
// Every *Tx method works inside the caller's transaction, so the server can
// commit it together with the idempotency ledger row.
type Engine interface {
	// DeployTx validates one workflow definition (YAML or JSON body) with the same code as `rflow validate`
	// and stores it; the generation bumps only when the spec hash changes. Invalid => error that is
	// (errors.As) a *workflow.Diagnostics listing every problem.
	DeployTx(ctx context.Context, tx pgx.Tx, name string, src []byte) (store.Deployed, error)
	// StartRunTx passes a manual/webhook claim through the claim gate and enqueues its first step, in tx.
	// created=false means the key already had a run; runID is then that existing run.
	StartRunTx(ctx context.Context, tx pgx.Tx, c store.Claim) (runID uuid.UUID, created bool, err error)
	RetryRunTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, error) // store.ErrNotFound / error when not failed
	CancelRunTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, error)
	// DecideApprovalTx approves or rejects a pending approval and enqueues what follows; the same
	// decision again returns it as it is; a conflicting or late one is a *store.ApprovalConflictError.
	DecideApprovalTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, d store.ApprovalDecision) (*store.Approval, error)
	// ResumeWorkflowTx unpauses a workflow and starts the runs claimed while it was paused (the console).
	ResumeWorkflowTx(ctx context.Context, tx pgx.Tx, name string) (int, error)
	// Workflow returns the current compiled definition (for webhook secret/idempotency_key/ttl).
	Workflow(ctx context.Context, name string) (*workflow.Workflow, error)
	// Namespace is the project's share of the database: every name in a
	// path, a query or a body is one of its local workflow names, and
	// every name in a reply too (store.Namespace). The engine's methods
	// take stored names, except DeployTx, which takes the local one.
	Namespace() store.Namespace
}

// Defaults and limits of Config.
const (
	DefaultBodyLimit = 1 << 20 // 1 MiB
	DefaultClientTTL = workflow.DefaultClientRetention
	DefaultAutoTTL   = workflow.DefaultDeterministicRetention
	// MinAutoTTL is the shortest retention allowed for deterministic
	// commands: their producers may redeliver for days, and a shorter
	// window would let a redelivery mutate twice.
	MinAutoTTL = workflow.MinDeterministicRetention
)

// Config configures a Server.
type Config struct {
	Pool   *pgxpool.Pool
	Engine Engine
	Logger *slog.Logger
	// APIToken is the full-access bearer token (RFLOW_API_TOKEN): it holds
	// every role.
	APIToken string
	// Tokens are the project's scoped tokens (api: tokens:), each with its
	// roles. Without APIToken and Tokens, /v1, the console and River UI are
	// disabled: every request there is refused with 503.
	Tokens []*workflow.APIToken
	// Proxies are the trusted reverse proxies (--trusted-proxy): their
	// X-Forwarded-Proto makes the console's cookie Secure, and their
	// X-Forwarded-For names the client the login throttle counts.
	Proxies *access.Proxies
	// BodyLimit caps request bodies (DefaultBodyLimit when zero); larger
	// bodies get 413 and change nothing.
	BodyLimit int64
	// ClientTTL is how long a client command's response stays replayable
	// (DefaultClientTTL when zero).
	ClientTTL time.Duration
	// AutoTTL is the retention of deterministic commands (cancellation, and
	// commands sent with "Idempotency-Class: automatic"); DefaultAutoTTL
	// when zero, and never less than MinAutoTTL. rflow start sets both from
	// the project's idempotency: block or its flags.
	AutoTTL time.Duration
	// River is the engine's River client (jobs.Engine.Client()); when set,
	// River UI is served at /riverui/ behind the API tokens and the
	// console's session (riverui.go).
	River *river.Client[pgx.Tx]
	// Networks are the project's networks; the console links transactions
	// and blocks to those that declare an explorer:.
	Networks []*workflow.Network
	// ConsoleSessions, when set, is the console's table of logins, shared
	// with the servers this process ran before (rflow dev's reloads).
	ConsoleSessions *console.Sessions
	// Metrics, when set, is served at /metrics without a token: it
	// exposes counts under project names, never run data (see
	// docs/operations.md). rflow start --metrics-addr serves it on a
	// listener of its own instead and leaves this nil.
	Metrics http.Handler
	// ReadyStall makes /readyz fail when a watched network's head has not
	// advanced for this long, or a watched cursor left a new block
	// unclaimed this long; zero checks only the database. Watch lists what
	// to watch: the chain triggers and wait feeds currently deployed.
	ReadyStall time.Duration
	Watch      func(context.Context) (ChainWatch, error)
	// LoopbackLogin opens the console to a browser on this machine without
	// a login (rflow dev on a loopback address; console.Config).
	LoopbackLogin bool
}

// Server serves rflow's HTTP API. Create it with New.
type Server struct {
	pool      *pgxpool.Pool
	engine    Engine
	ns        store.Namespace
	logger    *slog.Logger
	keyring   *access.Keyring
	proxies   *access.Proxies
	console   *console.Console
	bodyLimit int64
	clientTTL time.Duration
	autoTTL   time.Duration
	mux       *http.ServeMux
	handler   http.Handler
	riverUI   *riverui.Handler
	// readyStall and watch configure /readyz's chain checks; started is
	// when this process began, for a network that never recorded a block.
	readyStall time.Duration
	watch      func(context.Context) (ChainWatch, error)
	started    time.Time
	// txSlots bounds the transactions handlers hold at once to half the
	// pool. Requests with one idempotency key queue on the ledger row while
	// holding a connection; without the bound they could take every
	// connection and starve the one transaction they wait for, whenever it
	// (or the engine inside it) needs a second connection.
	txSlots chan struct{}
}

// New checks cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("server: a database pool is required")
	}
	if cfg.Engine == nil {
		return nil, errors.New("server: an engine is required")
	}
	s := &Server{
		pool: cfg.Pool, engine: cfg.Engine, ns: cfg.Engine.Namespace(), logger: cfg.Logger, keyring: access.NewKeyring(cfg.APIToken, cfg.Tokens),
		proxies:   cfg.Proxies,
		bodyLimit: cfg.BodyLimit, clientTTL: cfg.ClientTTL, autoTTL: cfg.AutoTTL,
		readyStall: cfg.ReadyStall, watch: cfg.Watch, started: time.Now(),
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case s.bodyLimit == 0:
		s.bodyLimit = DefaultBodyLimit
	case s.bodyLimit < 0:
		return nil, fmt.Errorf("server: body limit must be positive, got %d", cfg.BodyLimit)
	}
	switch {
	case s.clientTTL == 0:
		s.clientTTL = DefaultClientTTL
	case s.clientTTL < 0:
		return nil, fmt.Errorf("server: client command retention must be positive, got %s", cfg.ClientTTL)
	}
	switch {
	case s.autoTTL == 0:
		s.autoTTL = DefaultAutoTTL
	default:
		if err := workflow.CheckDeterministicRetention(s.autoTTL); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	s.txSlots = make(chan struct{}, max(1, cfg.Pool.Config().MaxConns/2))
	s.mux = http.NewServeMux()
	for _, rt := range s.routes() {
		s.mux.Handle(rt.Method+" "+rt.Pattern, rt.handler)
	}
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics)
	}
	s.mux.HandleFunc("/", s.notFound)
	s.handler = s.recoverPanics(s.mux)
	// The run console's buttons send their commands through this same
	// handler, so they share the API's ledger, checks and roles.
	ui, err := console.New(console.Config{Pool: cfg.Pool, Engine: cfg.Engine, Commands: s.handler,
		Keyring: s.keyring, Proxies: s.proxies, Logger: s.logger, RiverUI: cfg.River != nil, Networks: cfg.Networks,
		Sessions: cfg.ConsoleSessions, LoopbackLogin: cfg.LoopbackLogin})
	if err != nil {
		return nil, err
	}
	s.console = ui
	s.mux.Handle(console.Prefix, ui)
	if cfg.River != nil {
		h, err := s.newRiverUI(cfg.River)
		if err != nil {
			return nil, err
		}
		s.riverUI = h
		s.mountRiverUI(h)
	}
	return s, nil
}

// route is one registered endpoint.
type route struct {
	Method  string
	Pattern string // net/http pattern path, e.g. /v1/runs/{id}
	// Role is what a token needs to call it ("" for the public endpoints:
	// health probes and webhooks, which carry their own signature).
	Role    workflow.Role
	handler http.Handler
}

// routes is the one list of JSON endpoints: New registers it, and the
// OpenAPI test compares it (roles included) with docs/openapi.yaml. River
// UI and /metrics are mounted beside them (they speak their own formats).
func (s *Server) routes() []route {
	public := func(m, p string, h http.HandlerFunc) route { return route{m, p, "", h} }
	guarded := func(m, p string, role workflow.Role, h http.HandlerFunc) route {
		return route{m, p, role, s.requireRole(role, h)}
	}
	read, deploy, operate, approve := workflow.RoleRead, workflow.RoleDeploy, workflow.RoleOperate, workflow.RoleApprove
	return []route{
		public(http.MethodGet, "/healthz", s.healthz),
		public(http.MethodGet, "/readyz", s.readyz),
		public(http.MethodPost, "/hooks/{workflow}", s.webhook),
		guarded(http.MethodGet, "/v1/workflows", read, s.listWorkflows),
		guarded(http.MethodGet, "/v1/workflows/{name}", read, s.getWorkflow),
		guarded(http.MethodPut, "/v1/workflows/{name}", deploy, s.deployWorkflow),
		guarded(http.MethodPost, "/v1/workflows/{name}/pause", operate, s.pauseWorkflow),
		guarded(http.MethodPost, "/v1/workflows/{name}/resume", operate, s.resumeWorkflow),
		guarded(http.MethodPost, "/v1/workflows/{name}/runs", operate, s.startRun),
		guarded(http.MethodGet, "/v1/runs", read, s.listRuns),
		guarded(http.MethodGet, "/v1/runs/{id}", read, s.getRun),
		guarded(http.MethodPost, "/v1/runs/{id}/retry", operate, s.retryRun),
		guarded(http.MethodPost, "/v1/runs/{id}/cancel", operate, s.cancelRun),
		guarded(http.MethodGet, "/v1/approvals", read, s.listApprovals),
		guarded(http.MethodGet, "/v1/approvals/{id}", read, s.getApproval),
		guarded(http.MethodPost, "/v1/approvals/{id}/approve", approve, s.approve),
		guarded(http.MethodPost, "/v1/approvals/{id}/reject", approve, s.reject),
	}
}

// Handler returns the server's http.Handler, for tests or to mount it
// behind other middleware.
func (s *Server) Handler() http.Handler { return s.handler }

// Timeouts of ListenAndServe: generous enough for a 1 MiB body on a slow
// link, short enough that stalled clients cannot pin connections.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownTimeout   = 15 * time.Second
)

// ListenAndServe serves on addr until ctx is cancelled, then shuts down
// gracefully: it stops accepting connections and waits (up to 15s) for
// requests in flight, whose transactions either commit or roll back whole.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is ListenAndServe on an existing listener (for example port 0 in
// tests); it closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.startRiverUI(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.logger.InfoContext(ctx, "http server listening", "addr", ln.Addr().String())
	return serveUntil(ctx, srv, ln, "http server", shutdownTimeout)
}

// serveUntil serves srv on ln until ctx ends, then shuts it down within
// timeout; what names the server in errors.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, what string, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", what, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("%s shutdown: %w", what, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// begin starts a handler transaction once a slot is free; release must be
// called after the transaction ends.
func (s *Server) begin(ctx context.Context) (tx pgx.Tx, release func(), err error) {
	select {
	case s.txSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	tx, err = s.pool.Begin(ctx)
	if err != nil {
		<-s.txSlots
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return tx, func() {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		<-s.txSlots
	}, nil
}

// notFound answers every request no route matched: 405 (with Allow) when
// the path exists under another method, else 404, both as JSON errors.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
			message: fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)})
		return
	}
	writeError(w, &apiError{status: http.StatusNotFound, code: "not_found",
		message: fmt.Sprintf("no endpoint at %s", r.URL.Path)})
}

// recoverPanics turns a handler panic into a 500 JSON error (the
// transaction, if any, was rolled back by its deferred Rollback).
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger.ErrorContext(r.Context(), "http handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeError(w, errInternal)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
