package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/fault"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Config configures an Engine.
type Config struct {
	Pool *pgxpool.Pool
	// URL is the database URL; the node liveness lock needs its own
	// connection outside the pool.
	URL     string
	Project *workflow.Project
	Logger  *slog.Logger

	// Workers is how many step jobs run at once in this process (default 50).
	Workers int
	// FetchCooldown is River's minimum gap between fetches (default 5ms).
	// It bounds throughput at about Workers/FetchCooldown.
	FetchCooldown time.Duration
	// PollInterval is how often River looks for available jobs it was not
	// told of (default 20ms, see defaultPollInterval). A longer interval
	// costs an idle process fewer queries and a run's next step latency.
	PollInterval time.Duration
	// JobTimeout is River's timeout for a job's own database work (default
	// 2m). A step job gets its step's own timeout (an http_call's timeout)
	// on top, so River never cancels a step its timeout still allows.
	JobTimeout time.Duration
	// RescueAfter is when River's own rescuer retries a job stuck running
	// (default 5m, raised to the longest step job timeout of the project).
	// Jobs of a crashed process are rescued much sooner, by the node
	// liveness check.
	RescueAfter time.Duration
	// NodeGrace is how long after Postgres (re)starts a process that has
	// not re-registered since is not judged dead (default 10s): a restart
	// frees every liveness lock at once, and live processes need a moment
	// to take theirs again.
	NodeGrace time.Duration
	// WorkersOnly records that this process runs no triggers, so a
	// standby of its project does not wait for it (store.NodeRole).
	WorkersOnly bool
	// Console is the console URL this process serves, recorded on its
	// node for rflow status ("" for none).
	Console string
	// HTTPClient makes http_call and notify requests (default: a client
	// with no overall timeout; each step sets its own).
	HTTPClient *http.Client
	// MaxJumps caps goto jumps per run (loop guard; default 100).
	MaxJumps int
	// NoInline turns inline continuation off (step_carry.go): every step
	// then runs as a River job of its own. For measurement and tests.
	NoInline bool
	// InlineCap is how many steps one River job carries inline after its
	// own before it hands the run over to a new job (default 100), so a
	// goto loop does not hold a worker for ever.
	InlineCap int
	// Faults names crash points for tests, the relayer's included; nil in
	// production.
	Faults *fault.Set
	// Backends connect the relayer to each network, by chain id (see
	// DialBackends). An engine that works sends needs one for every network
	// it sends on; one that only enqueues (rflow runs retry) has none, and
	// then no relayer: it cannot be started.
	Backends map[uint64]relayer.Backend
	// DryRun stops every send before the relayer broadcasts: the relayer
	// records the simulated result and the step completes with it.
	DryRun bool
	// SendPollInterval is how often the relayer checks a send in flight
	// (default 1s).
	SendPollInterval time.Duration
	// LedgerCleanup bounds the idempotency-ledger cleanup cycles, which
	// run every LedgerCleanupInterval on the River leader.
	LedgerCleanup         LedgerCleanupConfig
	LedgerCleanupInterval time.Duration
	// Observer is told about claims, step attempts and finished runs, in
	// memory (the metrics package implements it); nil observes nothing.
	Observer Observer
	// TracerProvider, when set, makes each run a trace (see engine_trace.go);
	// nil records no spans.
	TracerProvider trace.TracerProvider
	// Middleware is added to the River client after the engine's own
	// (for example otelriver's).
	Middleware []rivertype.Middleware
	// Rehearsal, when set, makes this the engine of rehearsals (rflow
	// replay, rflow test): it runs only the namespaced workflows its
	// Rehearsal names, apart from every live process (see Rehearsal). A
	// live engine (nil) never runs a rehearsal's workflow or works its jobs.
	Rehearsal *Rehearsal
	// Namespace is the project's share of the database
	// (store.RegisterProject): the engine deploys, claims, runs, repairs
	// and retires only its workflows and works only its River queue. The
	// zero value is the home namespace, all of a single-project database.
	Namespace store.Namespace
}

// Engine executes workflow runs on River. It is safe for concurrent use.
type Engine struct {
	engineStore
	engineRiver
	engineSteps
	engineRelayer
	engineGuards
	engineTelemetry

	// rehearsal is Config.Rehearsal: nil for a live engine.
	rehearsal *Rehearsal

	// Stale counts step jobs that arrived for a run attempt, generation or
	// step attempt that no longer holds: stale-event rejections.
	Stale atomic.Int64
}

// engineStore is the engine's Postgres and the project it runs: the pool
// its transactions use, the URL of its liveness connection and its node.
type engineStore struct {
	pool    *pgxpool.Pool
	url     string
	project *workflow.Project
	// ns is the project's namespace (Config.Namespace).
	ns   store.Namespace
	node *store.Node
	// workersOnly: the process runs no triggers (recorded on its node).
	workersOnly bool
	console     string
}

// engineRiver is the River client the engine's jobs run on, with the
// timeouts and the liveness grace it is configured with (see Config).
type engineRiver struct {
	client      *river.Client[pgx.Tx]
	jobTimeout  time.Duration
	rescueAfter time.Duration
	nodeGrace   time.Duration
}

// engineSteps is what executing steps needs: the step-kind table, the
// compiled plans of the generations in use, the HTTP client of http_call
// and notify, the environment expressions read and the crash points.
type engineSteps struct {
	kinds   map[string]stepKind
	plansMu sync.Mutex
	plans   map[string]*plan
	// uncompiled are the generations (name@generation) already logged as
	// not compiling against this project (warnUncompiled), under plansMu.
	uncompiled map[string]bool
	// claimed is the generation each workflow's last won claim pinned,
	// under plansMu (claim_birth.go).
	claimed  map[string]int64
	http     *http.Client
	envVars  map[string]any
	maxJumps int
	faults   *fault.Set
	// inlineCap is how many steps a job carries after its own (0: inline
	// continuation is off); stopping is set once Stop begins, after which
	// no job carries a step further (step_carry.go).
	inlineCap int
	stopping  atomic.Bool
	// carryOK is whether every registered process knows carriers
	// (checkCarriers): while a process of an older version runs, no step
	// is carried.
	carryOK      atomic.Bool
	carryChecked atomic.Bool
}

// engineRelayer is the embedded relayer the sends go through (nil for an
// engine that only enqueues), and whether sends are simulated.
type engineRelayer struct {
	relayer *relayer.Relayer
	dryRun  bool
}

// engineGuards holds the guards kept in process memory: the rate_limit
// windows of guard_rate.go (the durable ones live in Postgres).
type engineGuards struct {
	rates rateWindows
}

// engineTelemetry is where the engine reports: logs, the in-memory
// observer (metrics) and traces.
type engineTelemetry struct {
	logger   *slog.Logger
	observer Observer
	tracer   trace.Tracer
	tracing  bool
}

// NewEngine builds the engine and its River client. Call Start to work.
func NewEngine(cfg Config) (*Engine, error) {
	if cfg.Pool == nil || cfg.Project == nil {
		return nil, errors.New("engine: Pool and Project are required")
	}
	e := &Engine{
		engineStore: engineStore{pool: cfg.Pool, url: cfg.URL, project: cfg.Project, ns: cfg.Namespace, workersOnly: cfg.WorkersOnly, console: cfg.Console},
		engineRiver: engineRiver{
			jobTimeout: cmp.Or(cfg.JobTimeout, defaultJobTimeout),
			nodeGrace:  cmp.Or(cfg.NodeGrace, defaultNodeGrace),
		},
		engineSteps: engineSteps{kinds: stepKinds(), plans: map[string]*plan{}, claimed: map[string]int64{}, http: cfg.HTTPClient,
			envVars: environ(cfg.Project), maxJumps: cfg.MaxJumps, faults: cfg.Faults},
		engineRelayer:   engineRelayer{dryRun: cfg.DryRun},
		engineTelemetry: engineTelemetry{logger: cfg.Logger, observer: cfg.Observer, tracer: newTracer(cfg.TracerProvider), tracing: cfg.TracerProvider != nil},
		rehearsal:       cfg.Rehearsal,
	}
	if e.observer == nil {
		e.observer = nopObserver{}
	}
	if !e.ns.Home() {
		e.observer = localObserver{Observer: e.observer, ns: e.ns}
	}
	e.rescueAfter = max(cmp.Or(cfg.RescueAfter, defaultRescueAfter), e.longestStepJob(cfg.Project)+e.jobTimeout)
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.http == nil {
		// Keep connections to step endpoints warm: the default transport
		// keeps only two idle connections per host, so a busy engine would
		// open a new TCP connection for most calls.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		e.http = &http.Client{Transport: t}
	}
	if e.maxJumps == 0 {
		e.maxJumps = 100
	}
	if !cfg.NoInline && cfg.Rehearsal == nil {
		// A rehearsal's jobs live in its own River schema, which the
		// repair scan and the console do not read: its steps keep jobs
		// of their own.
		e.inlineCap = cmp.Or(cfg.InlineCap, defaultInlineCap)
	}
	var middleware []rivertype.Middleware
	if e.tracing {
		// First, so the job's trace is the parent of every later middleware's span.
		middleware = append(middleware, &propagator{})
	}
	middleware = append(middleware, cfg.Middleware...)
	workers := river.NewWorkers()
	steps := &stepWorker{e: e}
	river.AddWorker(workers, steps)
	river.AddWorker(workers, &firstStepWorker{step: steps})
	river.AddWorker(workers, &pageWorker{e: e})
	river.AddWorker(workers, &approvalNoticeWorker{e: e})
	river.AddWorker(workers, &reorgWorker{e: e})
	river.AddWorker(workers, &repairWorker{e: e})
	var periodic []*river.PeriodicJob
	if err := cfg.Rehearsal.check(); err != nil {
		return nil, err
	}
	if cfg.Rehearsal.captures() {
		e.kinds[workflow.StepSend] = stepKind{effect: true, exec: (*Engine).execCapturedSend}
	}
	queue := e.queue()
	if len(cfg.Project.Wallets) > 0 && cfg.Backends != nil && !cfg.Rehearsal.captures() {
		// Only an engine that works sends has backends; one that only
		// enqueues (rflow runs retry) skips the wallets' key derivation.
		r, err := newRelayer(cfg.Pool, cfg.Project, cfg, queue, e.adoptSend, e.projectSend, e.onTxFinal, e.faults.Hit, middleware)
		if err != nil {
			return nil, err
		}
		r.AddWorkers(workers)
		e.relayer = r
	}
	lc, every := cfg.LedgerCleanup, cfg.LedgerCleanupInterval
	if cfg.Project != nil {
		// The project's idempotency.cleanup, where the caller set nothing.
		c := cfg.Project.Idempotency.Cleanup
		lc.BatchSize, lc.MaxBatches = cmp.Or(lc.BatchSize, c.Batch), cmp.Or(lc.MaxBatches, c.MaxBatches)
		every = cmp.Or(every, c.Every)
	}
	lc.Pool, lc.Logger = cfg.Pool, e.logger
	cleanup, err := NewLedgerCleanupWorker(lc)
	if err != nil {
		return nil, err
	}
	river.AddWorker(workers, cleanup)
	periodic = append(periodic, NewLedgerCleanupPeriodicJob(every))
	if e.rehearsal != nil {
		// The live processes' maintenance; a rehearsal enqueues none of it
		// (a leading rehearsal would put it in its own queue).
		periodic = nil
	}
	maxWorkers := cfg.Workers
	if maxWorkers <= 0 {
		maxWorkers = 50
	}
	cooldown := cfg.FetchCooldown
	if cooldown <= 0 {
		cooldown = 5 * time.Millisecond
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		ID:                   store.ProcessID(),
		Schema:               e.riverSchema(),
		Queues:               map[string]river.QueueConfig{queue: {MaxWorkers: maxWorkers}},
		Workers:              workers,
		FetchCooldown:        cooldown,
		FetchPollInterval:    cmp.Or(cfg.PollInterval, defaultPollInterval),
		JobTimeout:           e.jobTimeout, // step jobs: see stepWorker.Timeout
		RescueStuckJobsAfter: e.rescueAfter,
		MaxAttempts:          1000, // the step journal, not River, decides retries
		// A job of a kind this process has no worker for (one a newer rflow
		// version added, during a rolling upgrade) stays available for a
		// process that has one, instead of failing an attempt here.
		FetchOnlyKnownKinds: true,
		Logger:              e.logger.With("component", "river"),
		PeriodicJobs:        periodic,
		Middleware:          middleware,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	e.client = client
	return e, nil
}

// Namespace is the project's share of the database the engine works in.
func (e *Engine) Namespace() store.Namespace { return e.ns }

// defaultPollInterval is how often River looks for available jobs without
// being told of one. River's client sends an insert notification at most
// once per FetchCooldown per queue, and drops the ones in between instead
// of sending one after: a step's successor enqueued within 5 ms of the
// previous notification (the next step of a run that just started, on an
// idle process) waited for this poll, 70 ms of a 3-step run's 81 ms
// (bench: BenchmarkWebhookToThirdStep). A poll is one indexed query that
// finds nothing on an idle queue; under load notifications come first.
// About 50 queries a second on an idle process: Config.PollInterval (rflow
// start --poll-interval) trades them for latency.
const defaultPollInterval = 20 * time.Millisecond

// Client is the engine's River client (for other job kinds to enqueue in
// the same queue and transactions).
func (e *Engine) Client() *river.Client[pgx.Tx] { return e.client }

// Project is the project the engine was built with.
func (e *Engine) Project() *workflow.Project { return e.project }

// Start registers this process as a live node, rescues jobs left running by
// dead nodes, and starts working jobs. Triggers should start after it. A
// rehearsal in a River schema of its own only starts working its jobs.
func (e *Engine) Start(ctx context.Context) error {
	if e.rehearsal.ownSchema() {
		// Nothing of a live process's duties: its jobs are all in its own
		// schema, its sends captured, and it recovers nothing it did not
		// start.
		if err := e.client.Start(ctx); err != nil {
			return fmt.Errorf("start river: %w", err)
		}
		return nil
	}
	if len(e.project.Wallets) > 0 && e.relayer == nil {
		return errors.New("engine: the project has wallets but Config.Backends is nil, so no send could go out (build them with jobs.DialBackends)")
	}
	if e.url != "" {
		node, err := store.RegisterNodeAs(ctx, e.url, e.client.ID(), store.NodeRole{Project: e.project.Name, WorkersOnly: e.workersOnly,
			Console: e.console})
		if err != nil {
			return err
		}
		e.node = node
	}
	if err := e.Recover(ctx); err != nil {
		return err
	}
	e.checkCarriers(ctx)
	if err := e.client.Start(ctx); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	go e.watchNodes(ctx)
	go e.releaseThrottled(ctx)
	go e.maintainProject(ctx)
	return nil
}

// Recover runs the boot recovery pass: jobs a dead process was running are
// made available at once, and runs claimed while their workflow was paused
// start if it has been resumed. Everything else resumes by itself from the
// journal, because every parked run has a River job (delays are scheduled
// jobs; in-flight steps are running or available jobs); a run whose job
// was deleted or lost gets one again (RepairRuns).
func (e *Engine) Recover(ctx context.Context) error {
	if err := e.rescueDeadNodes(ctx); err != nil {
		return err
	}
	if e.relayer != nil {
		// Sends in flight get a driving job again if theirs was lost
		// (each engine its own: see adoptSend).
		if _, err := e.relayer.Recover(ctx); err != nil {
			return fmt.Errorf("relayer recovery: %w", err)
		}
	}
	// Budget reservations a crash left live settle against the relayer.
	if _, err := budgets.Reconcile(ctx, e.pool); err != nil {
		return fmt.Errorf("budget recovery: %w", err)
	}
	// Pending steps whose job is gone (deleted in River UI, lost in a
	// restore) get one again; the periodic repair job repeats this.
	if e.rehearsal == nil {
		if _, err := e.RepairRuns(ctx); err != nil {
			return fmt.Errorf("repair runs: %w", err)
		}
	}
	return nil
}

// rescueDeadNodes makes the jobs of dead processes available. This
// process's own jobs are never among them: it is still running them.
func (e *Engine) rescueDeadNodes(ctx context.Context) error {
	n, err := store.RescueDeadNodes(ctx, e.pool, e.client.ID(), e.nodeGrace)
	if n > 0 {
		e.logger.Info("rescued jobs of a dead process", "jobs", n)
	}
	return err
}

// watchNodes keeps this process's liveness lock and rescues the jobs of
// dead processes, every second. When the database connection is lost (a
// Postgres restart or outage), it reconnects and takes the lock again
// before it judges anyone: until then this process is not registered, and
// its view of the others is no better than theirs of it.
func (e *Engine) watchNodes(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	down := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if e.node != nil {
			// Long enough for a loaded server; a ping that overruns it
			// leaves the session (and its lock) alone.
			pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			re, err := e.node.Ping(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if !down {
					e.logger.Warn("database unreachable; steps wait until it is back", "err", err)
					down = true
				}
				continue
			}
			down = false
			switch {
			case re != nil && re.TakenForDead:
				e.logger.Warn("database connection was lost long enough for another process to take this one for dead; " +
					"steps it was running may have run again elsewhere (their outcomes are fenced)")
			case re != nil:
				e.logger.Info("database connection restored; liveness lock taken again")
			}
		}
		if err := e.rescueDeadNodes(ctx); err != nil && ctx.Err() == nil {
			e.logger.Warn("rescue dead nodes", "err", err)
		}
		e.checkCarriers(ctx)
	}
}

// Stop stops fetching new jobs and waits for in-flight steps to reach a
// journal-consistent point (their outcome transaction), up to ctx's
// deadline; after that their contexts are cancelled, which leaves them to
// be retried from the journal by the next process.
func (e *Engine) Stop(ctx context.Context) error {
	e.stopping.Store(true) // jobs in flight stop carrying steps (step_carry.go)
	err := e.client.Stop(ctx)
	if err != nil {
		hard, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = e.client.StopAndCancel(hard)
	}
	if e.node != nil {
		_ = e.node.Close(context.Background())
	}
	return err
}

// Workflow returns the current compiled definition of a deployed workflow.
func (e *Engine) Workflow(ctx context.Context, name string) (*workflow.Workflow, error) {
	if !e.owns(name) {
		return nil, e.scopeError(name)
	}
	row, err := store.GetWorkflow(ctx, e.pool, name)
	if err != nil {
		return nil, err
	}
	p, err := e.plan(ctx, e.pool, name, row.Generation)
	if err != nil {
		return nil, err
	}
	return p.wf, nil
}

// plan returns the compiled plan of one generation of a workflow, compiling
// it from the stored spec on first use. db is the caller's transaction when
// it has one, so a lookup never waits for a second connection.
func (e *Engine) plan(ctx context.Context, db store.DBTX, name string, generation int64) (*plan, error) {
	key := fmt.Sprintf("%s@%d", name, generation)
	e.plansMu.Lock()
	p := e.plans[key]
	e.plansMu.Unlock()
	if p != nil {
		return p, nil
	}
	spec, fromAPI, err := store.WorkflowSpec(ctx, db, name, generation)
	if err != nil {
		return nil, err
	}
	origin := workflow.OriginFile
	if fromAPI {
		origin = workflow.OriginAPI
	}
	wf, err := workflow.CompileSpec(e.project, spec, origin)
	if err != nil {
		return nil, &uncompiledError{workflow: name, generation: generation, trigger: specTrigger(spec), err: err}
	}
	// A spec has no lines; when it is the definition this process loaded
	// from its files, run that one, so run-time expression errors name
	// file:line:col as validate does.
	// A rehearsal runs its live workflow's definition under its own name,
	// and a workflow of a project that is not its database's home project
	// runs under its qualified name (store.Namespace).
	base := name
	if r, ok := store.ParseRehearsal(name); ok {
		base = r.Workflow
	}
	base, _ = e.ns.Local(base)
	if loaded := e.project.Workflow(base); loaded != nil && loaded.Hash == wf.Hash {
		wf = loaded
	}
	wf = rehearse(wf, name)
	p = newPlan(wf)
	e.plansMu.Lock()
	e.plans[key] = p
	e.plansMu.Unlock()
	return p, nil
}

// environ is the `env` expression variable: the variables the project
// declares under env: (Project.Env), read at start, and nothing else.
// workflow.Load is the one gate for what may be declared: it refuses the
// database URL, the API token and wallet secrets, and unset variables.
func environ(p *workflow.Project) map[string]any {
	out := make(map[string]any, len(p.Env))
	for _, k := range p.Env {
		if v, ok := os.LookupEnv(k); ok {
			out[k] = v
		}
	}
	return out
}
