package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/urfave/cli/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/fault"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/metrics"
	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

func startCommand() *cli.Command {
	return &cli.Command{
		Name:  "start",
		Usage: "run the engine: triggers, step workers and the HTTP endpoints",
		Description: "Several processes may run against one database; no work is done twice.\n" +
			"SIGTERM/SIGINT stops claiming, lets in-flight steps reach their journal, and exits 0.",
		Flags: append([]cli.Flag{
			configFlag(),
			&cli.StringFlag{Name: "http", Usage: "serve /healthz (and the API) on this address, e.g. 127.0.0.1:8080"},
			&cli.BoolFlag{Name: "workers-only", Usage: "work steps but run no triggers (scale out step throughput)"},
			&cli.BoolFlag{Name: "standby", Usage: "hot spare: hold no leases and work nothing until no process of this project that runs triggers is alive, then take over"},
			&cli.IntFlag{Name: "workers", Value: 50, Usage: "step jobs worked at once by this process"},
			&cli.BoolFlag{Name: "dry-run", Usage: "simulate every send and record the result instead of broadcasting"},
			&cli.Int64Flag{Name: "body-limit", Usage: "largest accepted HTTP request body in bytes", DefaultText: "1048576 (1 MiB)"},
			&cli.DurationFlag{Name: "poll-interval", Value: 20 * time.Millisecond, Usage: "how often each process looks for queued jobs it was not notified of: longer costs an idle process fewer queries (about 1/interval a second) and adds up to that much to a run's next step"},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "how long in-flight steps and the relayer's batches get to reach their journal on shutdown; those still running then are cancelled and retried by another process"},
			&cli.StringSliceFlag{Name: "trusted-proxy", Usage: "a reverse proxy (IP or CIDR, repeatable) whose X-Forwarded-Proto and X-Forwarded-For are believed: behind it, the console's cookie is Secure when the proxy says https"},
			&cli.StringFlag{Name: "metrics-addr", Usage: "serve /metrics on this address of its own (e.g. 127.0.0.1:9090) instead of on --http"},
			readyStallFlag(),
		}, retentionFlags()...),
		Action: func(c *cli.Context) error {
			if c.Bool("standby") && c.Bool("workers-only") {
				return usagef("--standby and --workers-only exclude each other: a standby runs triggers once it takes over")
			}
			if err := checkWorkers(c); err != nil {
				return err
			}
			if p := c.Duration("poll-interval"); p < minPollInterval {
				return usagef("--poll-interval %s: want at least %s (River fetches no more often than that)", p, minPollInterval)
			}
			watching := liveViewWanted(c)
			outage := &dbOutage{}
			logger := slog.New(outage.handler(newLogger(c).Handler()))
			var view *devView
			if watching {
				view = newDevView(c.App.Writer)
				view.quiet = outage.quiet
				logger = liveLogger(c, view, outage)
			}
			project, err := loadProject(c)
			if err != nil {
				return err
			}
			idem, err := retention(c, project)
			if err != nil {
				return err
			}
			proxies, err := access.ParseProxies(c.StringSlice("trusted-proxy"))
			if err != nil {
				return usagef("--trusted-proxy: %v", err)
			}
			// The ports first: taken, they are the one thing to fix, and
			// the database need not start for that.
			ln, err := listenHTTP(c.String("http"))
			if err != nil {
				return err
			}
			if ln != nil {
				defer ln.Close()
			}
			metricsLn, err := listenMetrics(c.String("metrics-addr"))
			if err != nil {
				return err
			}
			if metricsLn != nil {
				defer metricsLn.Close()
			}
			db, err := openDatabase(c, project.Name, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := ownEmbedded(db, project.Name); err != nil {
				return err
			}
			o := engineOptions{
				db: db, project: project, logger: logger, listener: ln, apiToken: os.Getenv("RFLOW_API_TOKEN"),
				workersOnly: c.Bool("workers-only"), standby: c.Bool("standby"), workers: c.Int("workers"), shutdown: c.Duration("shutdown-timeout"), pollInterval: c.Duration("poll-interval"), bodyLimit: c.Int64("body-limit"), dryRun: c.Bool("dry-run"),
				idempotency: idem, stdout: c.App.Writer, configPath: c.String("config"), readyStall: c.Duration("ready-stall"),
				proxies: proxies, metricsListener: metricsLn,
			}
			say := func(s string) { fmt.Fprintln(c.App.ErrWriter, "rflow: "+s) }
			if watching {
				say = view.say
			}
			o.fatal = superviseDatabase(c.Context, db, outage, say)
			o.outage, o.say = supervisedOutage(db, outage), say
			if watching {
				view.startBanner(project, db, ln)
				view.useProject(project)
				var stop func()
				o.ready, stop = view.follow(c.Context, db.Pool, panelTitle("rflow start", project.Name))
				defer stop()
			} else if db.Embedded != nil {
				fmt.Fprintf(c.App.ErrWriter, "rflow: embedded postgres, data in %s (for production, set --database-url / DATABASE_URL)\n"+
					"rflow: database %s (read commands such as `rflow runs list` attach to it while this runs)\n",
					db.Embedded.DataDir(), redact.URL(db.URL))
			}
			err = runEngine(c.Context, o)
			if err != nil && c.Context.Err() != nil {
				// SIGTERM/SIGINT during start-up: nothing was left half
				// done (every step is transactional); a clean stop.
				return nil
			}
			return err
		},
	}
}

// listenHTTP listens on addr before anything else starts, so a port in use
// is one clear line. An empty addr serves nothing (nil listener).
func listenHTTP(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, cli.Exit(fmt.Sprintf("port %s is in use; pass --http to choose another", addr), exitFailure)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--http): %w", addr, err)
	}
	return ln, nil
}

// listenMetrics listens on --metrics-addr (nil listener when unset).
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, cli.Exit(fmt.Sprintf("port %s is in use; pass --metrics-addr to choose another", addr), exitFailure)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--metrics-addr): %w", addr, err)
	}
	return ln, nil
}

// ownEmbedded refuses to run the engine on an embedded Postgres another
// rflow process runs: that process stops the server when it exits, which
// would leave this one without its database. Read commands attach to it;
// a second engine can share it on purpose through its URL.
func ownEmbedded(db *database, project string) error {
	if db.Embedded == nil || !db.Embedded.Attached() {
		return nil
	}
	return cli.Exit(fmt.Sprintf("the embedded postgres of project %s is already running (pid %d), under another rflow process: "+
		"stop that one first, or share its database on purpose with --database-url %s", project, db.Embedded.Pid(), redact.URL(db.URL)), exitFailure)
}

type engineOptions struct {
	// pollInterval is River's fetch poll (--poll-interval; 0: the engine's default).
	pollInterval time.Duration
	db           *database
	project      *workflow.Project
	logger       *slog.Logger
	// listener serves /healthz, the API and the console (nil: no HTTP server).
	listener net.Listener
	// apiToken is the command API's and the console's full-access token
	// (RFLOW_API_TOKEN); the project's api: tokens: add scoped ones.
	apiToken string
	// loopbackLogin opens the console without a login to a browser on
	// this machine (rflow dev on a loopback address only).
	loopbackLogin bool
	// proxies are the --trusted-proxy reverse proxies.
	proxies *access.Proxies
	// metricsListener serves /metrics alone (--metrics-addr); nil serves
	// it on listener.
	metricsListener net.Listener
	// workersOnly works steps and runs no triggers.
	workersOnly bool
	// standby waits, holding nothing, until no other process is alive.
	standby  bool
	workers  int
	shutdown time.Duration
	// bodyLimit caps HTTP request bodies (0: the server's 1 MiB default).
	bodyLimit int64
	// dryRun simulates sends instead of broadcasting them.
	dryRun bool
	// idempotency is the command ledger's retention (zero: the project's).
	idempotency workflow.Idempotency
	stdout      interface{ Write([]byte) (int, error) }
	// configPath is the project file, for messages.
	configPath string
	// ready, when set, is told the engine is up (rflow dev prints then).
	ready func(e *jobs.Engine)
	// sessions, when set, keeps the console's logins across the servers
	// of one process (rflow dev's reloads).
	sessions *console.Sessions
	// deploy, when set, replaces the start-up sync (SyncWorkflows): a
	// reload of rflow dev deploys its file on purpose, rollbacks included.
	deploy func(ctx context.Context, e *jobs.Engine) error
	// fatal ends the engine at once with the error it receives: the
	// embedded database is gone for good (superviseDatabase).
	fatal <-chan error
	// outage is the supervised embedded database's state (nil for a
	// database of your own): a start-up it interrupted is tried again, and
	// say tells the operator so.
	outage *dbOutage
	say    func(string)
	// readyStall is how long a chain task (a network's head, a trigger, a
	// wait feed) may make no progress before /readyz fails (0: never).
	readyStall time.Duration
	// observer, tracer and middleware instrument the engine (metrics and
	// traces; runEngine sets them, nil for commands that only enqueue).
	observer   jobs.Observer
	tracer     trace.TracerProvider
	middleware []rivertype.Middleware
}

// console is the console URL o serves ("" without --http).
func (o engineOptions) console() string {
	if o.listener == nil {
		return ""
	}
	return consoleURL(o.listener.Addr().String())
}

// minPollInterval is the shortest --poll-interval: River's fetch cooldown
// (jobs.Config.FetchCooldown's default) bounds how often it fetches anyway.
const minPollInterval = 5 * time.Millisecond

// defaultReadyStall is --ready-stall's default: several poll intervals and
// block ranges of a healthy trigger, far below an operator's patience.
const defaultReadyStall = 2 * time.Minute

func readyStallFlag() cli.Flag {
	return &cli.DurationFlag{Name: "ready-stall", Value: defaultReadyStall,
		Usage: "fail /readyz when a network's head, a chain trigger or a wait feed makes no progress this long (0 disables)"}
}

// deployProject migrates the database, builds the engine (not started) and
// syncs the project's workflows: what start does before it works, and all
// that `rflow run` needs to claim a run on a fresh database. backends are
// the relayer's (nil: an engine that only enqueues, with no relayer).
func deployProject(ctx context.Context, o engineOptions, backends map[uint64]relayer.Backend) (*jobs.Engine, error) {
	engine, err := migratedEngine(ctx, o, backends)
	if err != nil {
		return nil, err
	}
	if o.deploy != nil {
		return engine, o.deploy(ctx, engine)
	}
	synced, err := engine.SyncWorkflows(ctx)
	if err != nil {
		return nil, err
	}
	logSync(o.logger, synced, o.configPath)
	if err := saveSources(ctx, o.db.Pool, o.project); err != nil {
		return nil, err
	}
	return engine, nil
}

// migratedEngine migrates the database and builds an engine that is not
// started.
func migratedEngine(ctx context.Context, o engineOptions, backends map[uint64]relayer.Backend) (*jobs.Engine, error) {
	if _, err := store.Migrate(ctx, o.db.Pool, nil); err != nil {
		return nil, err
	}
	// The project's share of the database: registered here, by the
	// commands that deploy and run it, never by those that only read.
	ns, err := store.RegisterProject(ctx, o.db.Pool, o.project.Name)
	if err != nil {
		return nil, err
	}
	return jobs.NewEngine(jobs.Config{
		Pool: o.db.Pool, URL: o.db.URL, Project: o.project, Namespace: ns, Logger: o.logger, Backends: backends,
		Workers: o.workers, PollInterval: o.pollInterval, Faults: fault.Parse(os.Getenv(fault.Env)), DryRun: o.dryRun, WorkersOnly: o.workersOnly,
		Observer: o.observer, TracerProvider: o.tracer, Middleware: o.middleware, Console: o.console(),
	})
}

// runEngineOnce deploys the project and runs the engine and triggers until
// ctx ends, then shuts down gracefully (runEngine tries its start-up again
// when the embedded Postgres died under it).
func runEngineOnce(ctx context.Context, o engineOptions) error {
	// A wrong chain_id never heals: stop now, saying what to fix, before
	// the database is touched.
	if err := checkNetworks(ctx, o.project, o.logger); err != nil {
		return err
	}
	if o.standby {
		// Liveness is judged from rflow.nodes, so the standby migrates
		// first; then it waits, holding nothing.
		if _, err := store.Migrate(ctx, o.db.Pool, nil); err != nil {
			return err
		}
		if err := awaitTakeover(ctx, o.db, o.logger, o.project.Name); err != nil {
			return err
		}
	}
	// The relayer sends through the network's rpc: list with failover.
	backends, releaseBackends, err := jobs.DialBackends(ctx, o.project, o.logger)
	if err != nil {
		return err
	}
	defer releaseBackends()
	tr, err := setupTracing(ctx)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.shutdown(sctx); err != nil {
			o.logger.Warn("flushing traces", "err", err)
		}
	}()
	// One registry per process, fed by the engine in memory and by the
	// database at scrape time.
	if _, err := store.Migrate(ctx, o.db.Pool, nil); err != nil {
		return err
	}
	ns, err := store.RegisterProject(ctx, o.db.Pool, o.project.Name)
	if err != nil {
		return err
	}
	prom := metrics.New(metrics.Config{Pool: o.db.Pool, Logger: o.logger, Namespace: ns})
	o.observer, o.tracer, o.middleware = prom, tr.provider, tr.middleware
	engine, err := deployProject(ctx, o, backends)
	if err != nil {
		return err
	}
	// Work stops when ctx ends; triggers get their own context so they stop
	// claiming first.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	if err := engine.Start(workCtx); err != nil {
		// Whatever it got as far as (its node's liveness connection) goes
		// with it: a start-up tried again registers anew.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = engine.Stop(sctx)
		return err
	}
	triggers, stopTriggers := context.WithCancel(ctx)
	defer stopTriggers()
	var wg sync.WaitGroup
	if !o.workersOnly {
		wg.Add(1)
		go func() { defer wg.Done(); engine.RunCron(triggers) }()
		svc, err := chainService(triggers, engine, o.db, o.logger)
		if err != nil {
			_ = engine.Stop(context.Background())
			return err
		}
		if svc != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer svc.Close()
				if err := svc.Run(triggers); err != nil && triggers.Err() == nil {
					o.logger.Error("chain triggers stopped", "err", err)
				}
			}()
		}
	}
	if o.listener != nil {
		idem := o.idempotency
		if idem == (workflow.Idempotency{}) {
			idem = o.project.Idempotency
		}
		o.logger.Info("command ledger retention", "retention", describeRetention(idem))
		metricsOnMain := prom.Handler()
		if o.metricsListener != nil {
			metricsOnMain = nil
		}
		srv, err := server.New(server.Config{Pool: o.db.Pool, Engine: engine, Logger: o.logger,
			APIToken: o.apiToken, Tokens: o.project.APITokens, Proxies: o.proxies, BodyLimit: o.bodyLimit,
			ClientTTL: idem.ClientRetention, AutoTTL: idem.DeterministicRetention,
			River: engine.Client(), Networks: o.project.Networks, Metrics: metricsOnMain, ReadyStall: o.readyStall, Watch: chainWatch(engine),
			ConsoleSessions: o.sessions, LoopbackLogin: o.loopbackLogin})
		if err != nil {
			_ = engine.Stop(context.Background())
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(triggers, o.listener); err != nil {
				o.logger.Error("http server", "err", err)
			}
		}()
	}
	if o.metricsListener != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := server.ServeMetrics(triggers, o.metricsListener, prom.Handler(), o.logger); err != nil {
				o.logger.Error("metrics server", "err", err)
			}
		}()
	}
	if o.ready != nil {
		o.ready(engine)
	}
	o.logger.Info("rflow started", "project", o.project.Name, "workflows", len(o.project.Workflows), "workers_only", o.workersOnly, "standby", o.standby)

	select {
	case <-ctx.Done():
	case err := <-o.fatal:
		// Nothing can reach its journal without the database: no drain.
		stopTriggers()
		wg.Wait()
		stopWork()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = engine.Stop(sctx)
		return err
	}
	stopTriggers()
	wg.Wait()
	return drain(o, engine, stopWork)
}

// drain is the shutdown after SIGTERM/SIGINT, triggers already stopped: it
// says what is in flight, waits up to --shutdown-timeout for it to reach
// its journal, and says how it ended. Jobs still running at the timeout
// are cancelled: their steps are retried by the next process, with the
// same idempotency keys.
func drain(o engineOptions, engine *jobs.Engine, stopWork func()) error {
	qctx, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
	jobs, total, err := engine.InFlight(qctx, 10)
	qcancel()
	if err != nil {
		o.logger.Warn("shutting down: cannot list the jobs in flight", "err", err)
	}
	o.logger.Info("shutting down: no new claims; waiting for what is in flight to reach its journal",
		"in_flight", total, "jobs", strings.Join(jobs, ", "), "timeout", o.shutdown)
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdown)
	defer cancel()
	err = engine.Stop(sctx)
	stopWork()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || sctx.Err() != nil:
		o.logger.Warn("shutdown timeout: jobs still running were cancelled; another process retries their steps "+
			"(same idempotency keys)", "waited", time.Since(start).Round(time.Millisecond), "timeout", o.shutdown)
	case err != nil:
		return fmt.Errorf("shutdown: %w", err)
	default:
		o.logger.Info("stopped: everything in flight reached its journal", "in_flight", total,
			"waited", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// standbyPoll is how often a standby checks whether any other process is
// alive: the bound on how long work waits after the last one dies.
const standbyPoll = time.Second

// awaitTakeover is a hot standby's wait: it registers no node, starts no
// River client, takes no lease and claims nothing, and returns once no
// process of its project that runs triggers holds its liveness lock
// (store.LiveTriggerNodes): --workers-only processes of the project and
// processes of other projects do not hold its trigger role. The caller
// then starts as any process does after a crash: it registers, rescues the
// dead processes' jobs and recovers in-flight sends (Engine.Start runs
// Engine.Recover before working anything), and only then starts triggers.
// Several standbys may take over at once; that is an ordinary scale-out.
func awaitTakeover(ctx context.Context, db *database, logger *slog.Logger, project string) error {
	logged := false
	for {
		n, err := store.LiveTriggerNodes(ctx, db.Pool, project)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("standby: cannot check liveness; retrying", "err", err)
		case err == nil && n == 0:
			logger.Info("standby: no process of this project runs its triggers; taking over", "project", project)
			return nil
		case err == nil && !logged:
			logger.Info("standby: waiting while this project's trigger holder is alive", "project", project, "live", n)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(standbyPoll):
		}
	}
}

// logSync says what the start-up sync did. A superseded spec is a WARN:
// this process's file is older than what is deployed, and the process runs
// the deployed generation.
func logSync(logger *slog.Logger, s jobs.Sync, configPath string) {
	if configPath == "" {
		configPath = "rflow.yaml"
	}
	for _, d := range s.Deployed {
		switch {
		case d.Changed:
			logger.Info("deployed workflow", "workflow", d.Name, "generation", d.Generation)
		case d.Superseded != 0:
			logger.Warn(fmt.Sprintf("workflow %s: %s holds generation %d, superseded by generation %d; not redeployed, running generation %d "+
				"(to roll back on purpose: rflow workflows deploy -c %s --workflow %s)",
				d.Name, configPath, d.Superseded, d.Generation, d.Generation, configPath, d.Name),
				"workflow", d.Name, "file_generation", d.Superseded, "current_generation", d.Generation)
		}
	}
	for _, d := range s.Others {
		logger.Info("workflow deployed through the API, not in the project file; it stays deployed", "workflow", d.Name,
			"generation", d.Generation, "config", configPath)
	}
	for _, d := range s.Missing {
		logger.Warn(fmt.Sprintf("workflow %s was deployed from a project file, but %s no longer has it: its triggers do not run "+
			"in this process; runs in flight finish (rflow workflows deploy -c %s retires it; add it back to keep it)",
			d.Name, configPath, configPath), "workflow", d.Name, "generation", d.Generation)
	}
}

// chainWatch lists the cursor tasks of the deployed chain triggers and
// wait feeds and the networks they read, for /readyz: the set the chain
// service runs, so a workflow deployed through the API is watched too and
// a removed one no longer is.
func chainWatch(engine *jobs.Engine) func(context.Context) (server.ChainWatch, error) {
	cfg := engine.ChainConfig()
	return func(ctx context.Context) (server.ChainWatch, error) {
		t, err := cfg.Reload(ctx)
		if err != nil {
			return server.ChainWatch{}, err
		}
		w := cfg.Watched(t)
		out := server.ChainWatch{Tasks: w.Tasks}
		for _, n := range w.Networks {
			out.Networks = append(out.Networks, server.WatchedNetwork{Name: n.Name, ChainID: n.ChainID})
		}
		return out, nil
	}
}

// checkNetworks asks every RPC URL of the project's networks for its chain
// id, before anything is written to the database: a wrong chain_id exits 1
// with nothing deployed. URLs that answered go first in each network's rpc
// list, for every client dialled after (ingestion, the relayer).
func checkNetworks(ctx context.Context, p *workflow.Project, logger *slog.Logger) error {
	nets := jobs.ChainNetworks(p)
	if len(nets) == 0 {
		return nil
	}
	checked, err := chain.CheckNetworks(ctx, nets, contractRefs(p), logger.With("component", "chain"))
	if err != nil {
		return err
	}
	for i, n := range checked {
		p.Networks[i].RPC = n.RPC
	}
	// A node without the finality tags a workflow follows never heals
	// either.
	return chain.CheckFinality(ctx, checked, tagUses(p), logger.With("component", "chain"))
}

// tagUses lists the project's uses of finality tags for chain.CheckFinality.
func tagUses(p *workflow.Project) []chain.FinalityUse {
	var out []chain.FinalityUse
	for _, u := range p.TagUses() {
		out = append(out, chain.FinalityUse{Network: u.Network, Tag: store.FinalityTag(u.Tag), What: u.What})
	}
	return out
}

// chainService builds the event/block/read trigger service, or nil when the
// project declares no network. It runs the deployed workflows' chain
// triggers, including those deployed later through the API.
func chainService(ctx context.Context, engine *jobs.Engine, db *database, logger *slog.Logger) (*chain.Service, error) {
	cfg := engine.ChainConfig()
	if len(cfg.Networks) == 0 {
		return nil, nil // no chain: no chain trigger can be deployed either
	}
	return chain.NewService(ctx, db.Pool, engine, cfg, logger)
}

// contractRefs lists the project's contracts for chain.CheckContracts.
func contractRefs(p *workflow.Project) []chain.ContractRef {
	refs := make([]chain.ContractRef, 0, len(p.Contracts))
	for _, c := range p.Contracts {
		refs = append(refs, chain.ContractRef{Name: c.Name, Network: c.Network, Address: c.Address})
	}
	return refs
}

// loadProject loads and validates the project file; validation errors are
// printed one per line and make the command fail.
func loadProject(c *cli.Context) (*workflow.Project, error) {
	return loadProjectWith(c, workflow.LoadOptions{})
}

func loadProjectWith(c *cli.Context, opts workflow.LoadOptions) (*workflow.Project, error) {
	p, err := loadProjectFile(c, opts)
	if err != nil {
		return nil, err
	}
	printWarnings(c, p)
	return p, nil
}

// loadProjectFile is loadProjectWith that leaves the valid project's
// warnings to the caller (printWarnings), for output that must come first.
func loadProjectFile(c *cli.Context, opts workflow.LoadOptions) (*workflow.Project, error) {
	if err := projectFileMissing(c); err != nil {
		return nil, err
	}
	p, err := workflow.Load(c.String("config"), opts)
	if err != nil {
		var ds workflow.Diagnostics
		if errors.As(err, &ds) {
			for _, d := range ds {
				fmt.Fprintln(c.App.ErrWriter, d.String())
			}
			return nil, cli.Exit(fmt.Sprintf("%s is not valid (%d problem(s))", c.String("config"), len(ds.Errors())), exitFailure)
		}
		return nil, err
	}
	return p, nil
}

func printWarnings(c *cli.Context, p *workflow.Project) {
	for _, w := range p.Warnings {
		fmt.Fprintln(c.App.ErrWriter, w.String())
	}
}
