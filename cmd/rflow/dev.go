package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/examples/quickstart"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run the quickstart example on an embedded Postgres and an embedded dev chain",
		Description: "Starts an embedded Postgres (data in $XDG_DATA_HOME/rflow/quickstart), a dev chain that\n" +
			"emits Deposit events, and the examples/quickstart workflows, and prints runs as they go.\n" +
			"--database-url uses your database instead. --rpc uses your node instead of the dev chain: the\n" +
			"Emitter contract is deployed there with anvil's first dev key (the node must fund it), unless\n" +
			"--contract (or RFLOW_DEV_CONTRACT) names an Emitter already deployed, which is then only watched\n" +
			"(and RFLOW_DEV_WALLET_KEY must name a funded key for the send step).\n" +
			"Ctrl-C or SIGTERM stops everything.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Value: "127.0.0.1:8080", Usage: "serve /healthz (and the API) on this address"},
			&cli.StringFlag{Name: "rpc", Usage: "JSON-RPC URL of your own node instead of the dev chain"},
			&cli.StringFlag{Name: "contract", EnvVars: []string{quickstart.EnvContract},
				Usage: "with --rpc: address of a deployed Emitter to watch (nothing is deployed or emitted)"},
			&cli.StringFlag{Name: "chain", Value: devchain.BackendAuto,
				Usage: "dev chain: auto (anvil when RFLOW_ANVIL or PATH has it, else go-ethereum's simulated backend), simulated or anvil"},
			&cli.DurationFlag{Name: "emit-every", Value: 3 * time.Second, Usage: "how often the dev chain emits a Deposit"},
			&cli.IntFlag{Name: "workers", Value: 10, Usage: "step jobs worked at once"},
		},
		Action: runDev,
	}
}

func runDev(c *cli.Context) error {
	err := dev(c)
	if err != nil && c.Context.Err() != nil {
		// Ctrl-C while starting up (initdb, migrations) is a stop, not a
		// failure: nothing ran yet, and everything started is shut down.
		return nil
	}
	return err
}

func dev(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("dev takes no arguments")
	}
	if contract := c.String("contract"); contract != "" {
		switch {
		case c.String("rpc") == "":
			return usagef("--contract needs --rpc (the dev chain deploys its own Emitter)")
		case !common.IsHexAddress(contract):
			return usagef("--contract %q is not an address", contract)
		case os.Getenv(quickstart.EnvWalletKey) == "":
			return usagef("with --contract, set %s to the hex private key of an account your node funds (the quickstart's send step uses it)",
				quickstart.EnvWalletKey)
		}
	}
	if c.Duration("emit-every") <= 0 {
		return usagef("--emit-every must be positive")
	}
	switch b := c.String("chain"); b {
	case devchain.BackendAuto, devchain.BackendSimulated, devchain.BackendAnvil:
	default:
		return usagef("--chain %q: use auto, simulated or anvil", b)
	}
	logger := devLogger(c)
	view := newDevView(c.App.Writer)
	ctx := c.Context

	endpoint, err := startDevEndpoint(view)
	if err != nil {
		return err
	}
	defer endpoint.Close()

	// The database first: the first start initialises it, which takes a
	// while, and the dev chain's deposits should not pile up meanwhile.
	db, err := openDatabase(c, quickstartName, logger)
	if err != nil {
		return err
	}
	defer db.Close()

	ch, err := startDevChain(ctx, c, view, logger)
	if err != nil {
		return err
	}
	defer ch.close()

	dir, err := os.MkdirTemp("", "rflow-quickstart-")
	if err != nil {
		return fmt.Errorf("project directory: %w", err)
	}
	defer os.RemoveAll(dir)
	path, err := quickstart.WriteTo(dir)
	if err != nil {
		return err
	}
	vars := map[string]string{
		quickstart.EnvRPC:        ch.url,
		quickstart.EnvChainID:    strconv.FormatInt(ch.chainID, 10),
		quickstart.EnvContract:   ch.contract.Hex(),
		quickstart.EnvStartBlock: strconv.FormatUint(ch.startBlock, 10),
		quickstart.EnvEndpoint:   endpoint.url,
	}
	// The send step's wallet: an account funded for this session, unless
	// --contract watches your own (then RFLOW_DEV_WALLET_KEY names a key).
	if ch.walletKey != "" {
		vars[quickstart.EnvWalletKey] = ch.walletKey
	}
	project, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}})
	if err != nil {
		return fmt.Errorf("the embedded quickstart project does not load: %w", err)
	}
	if project.Name != quickstartName {
		return fmt.Errorf("the embedded quickstart project is named %q, want %q", project.Name, quickstartName)
	}

	view.banner(project, db, ch, endpoint.url, c.String("http"))
	started := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWatch(); wg.Wait() }()
	return runEngine(ctx, engineOptions{
		db: db, project: project, logger: logger, httpAddr: c.String("http"),
		workers: c.Int("workers"), shutdown: 5 * time.Second, stdout: c.App.Writer,
		ready: func(*jobs.Engine) {
			wg.Add(1)
			go func() { defer wg.Done(); view.watch(watchCtx, db.Pool, started) }()
		},
	})
}

// quickstartName is the quickstart project's name: it keys the embedded
// database's data directory, which is opened before the project is loaded.
const quickstartName = "quickstart"

// devLogger logs warnings and errors only, unless --log-level is given:
// the live view is the output of rflow dev.
func devLogger(c *cli.Context) *slog.Logger {
	if c.IsSet("log-level") {
		return newLogger(c)
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// devChain is the chain rflow dev watches: the dev chain it started, a node
// it deployed the Emitter on, or a node and contract it only watches.
type devChain struct {
	desc       string
	url        string
	chainID    int64
	contract   common.Address
	startBlock uint64
	walletKey  string // empty: from the environment
	close      func()
}

func startDevChain(ctx context.Context, c *cli.Context, view *devView, logger *slog.Logger) (*devChain, error) {
	opts := devchain.Options{Backend: c.String("chain"), EmitEvery: c.Duration("emit-every"), Logger: logger,
		OnDeposit: view.deposit}
	rpcURL, contract := c.String("rpc"), c.String("contract")
	switch {
	case rpcURL == "":
		ch, err := devchain.Start(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("dev chain: %w", err)
		}
		desc := ch.Backend
		if ch.Pid != 0 {
			desc += fmt.Sprintf(" (pid %d)", ch.Pid)
		}
		return &devChain{desc: desc, url: ch.URL, chainID: ch.ChainID, contract: ch.Contract,
			walletKey: ch.WalletKey, close: func() { _ = ch.Close() }}, nil
	case contract == "":
		ch, err := devchain.Attach(ctx, rpcURL, opts)
		if err != nil {
			return nil, fmt.Errorf("%w (to watch an Emitter you deployed yourself, pass --contract)", err)
		}
		return &devChain{desc: "your node, Emitter deployed by rflow dev", url: ch.URL, chainID: ch.ChainID,
			contract: ch.Contract, walletKey: ch.WalletKey, close: func() { _ = ch.Close() }}, nil
	default:
		client, err := ethclient.DialContext(ctx, rpcURL)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", rpcURL, err)
		}
		defer client.Close()
		id, err := client.ChainID(ctx)
		if err != nil {
			return nil, fmt.Errorf("chain id of %s: %w", rpcURL, err)
		}
		head, err := client.BlockNumber(ctx)
		if err != nil {
			return nil, fmt.Errorf("head of %s: %w", rpcURL, err)
		}
		return &devChain{desc: "your node, watching your Emitter from its head", url: rpcURL, chainID: id.Int64(),
			contract: common.HexToAddress(contract), startBlock: head, close: func() {}}, nil
	}
}

// devEndpoint is the local HTTP endpoint the quickstart's steps call.
type devEndpoint struct {
	url string
	srv *http.Server
}

func (e *devEndpoint) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
}

// startDevEndpoint serves POST /dev/echo (echoes the JSON body and rates a
// deposit's amount: "gold" from 1 ether) and POST /dev/notify (the view
// shows the text under the step that sent it) on a loopback port.
func startDevEndpoint(view *devView) (*devEndpoint, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /dev/echo", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			http.Error(w, `{"error":"body must be a JSON object"}`, http.StatusBadRequest)
			return
		}
		tier := "standard"
		if amount, ok := new(big.Int).SetString(fmt.Sprint(body["amount"]), 10); ok && amount.Cmp(big.NewInt(weiPerEther)) >= 0 {
			tier = "gold"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"tier": tier, "echo": body, "idempotency_key": r.Header.Get("Idempotency-Key"),
		})
	})
	mux.HandleFunc("POST /dev/notify", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Text string `json:"text"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
			http.Error(w, `{"error":"body must be a JSON object"}`, http.StatusBadRequest)
			return
		}
		view.notify(r.Header.Get("Idempotency-Key"), body.Text)
		w.WriteHeader(http.StatusNoContent)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dev endpoint: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &devEndpoint{url: "http://" + l.Addr().String(), srv: srv}, nil
}

// weiPerEther scales amounts for the dev endpoint's rating and the view.
const weiPerEther = 1e18

// devView prints the live view: runs as they are claimed, step by step, and
// completed. On a terminal it is tidy (symbols, colors, short ids); otherwise
// it is plain key=value lines, one event per line, for logs and tests.
type devView struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool

	// notes holds notifications the local endpoint received, by the
	// request's Idempotency-Key (<run id>:<step key>), until the step's line
	// is printed: the view polls the journal, so the request comes first.
	notesMu sync.Mutex
	notes   map[string][]string
}

// maxNotes bounds notes kept for steps the view never prints (runs claimed
// before it started).
const maxNotes = 1000

func newDevView(w io.Writer) *devView {
	v := &devView{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb" {
			v.tty = true
		}
	}
	return v
}

const (
	ansiReset = "\x1b[0m"
	ansiDim   = "\x1b[2m"
	ansiBold  = "\x1b[1m"
	ansiGreen = "\x1b[32m"
	ansiRed   = "\x1b[31m"
	ansiCyan  = "\x1b[36m"
	ansiYell  = "\x1b[33m"
)

// color wraps s in an ANSI color on a terminal (unless NO_COLOR is set).
func (v *devView) color(code, s string) string {
	if !v.tty || os.Getenv("NO_COLOR") != "" {
		return s
	}
	return code + s + ansiReset
}

func (v *devView) printf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.w, format+"\n", args...)
}

func (v *devView) stamp(t time.Time) string {
	if v.tty {
		return v.color(ansiDim, t.Local().Format("15:04:05"))
	}
	return t.UTC().Format("15:04:05.000")
}

func (v *devView) banner(p *workflow.Project, db *database, ch *devChain, endpoint, httpAddr string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s project %s (examples/quickstart, %d workflow(s))\n", v.color(ansiBold, "rflow dev"), p.Name, len(p.Workflows))
	if db.Embedded != nil {
		fmt.Fprintf(&b, "  postgres  embedded, pid %d, data in %s\n", db.Embedded.Pid(), db.Embedded.DataDir())
	} else {
		fmt.Fprintf(&b, "  postgres  your database (--database-url)\n")
	}
	fmt.Fprintf(&b, "  database  %s\n", redact.URL(db.URL))
	fmt.Fprintf(&b, "  chain     %s, chain id %d, %s\n", ch.desc, ch.chainID, ch.url)
	fmt.Fprintf(&b, "  contract  Emitter at %s\n", ch.contract.Hex())
	fmt.Fprintf(&b, "  endpoint  %s/dev/echo, %s/dev/notify\n", endpoint, endpoint)
	if httpAddr != "" {
		fmt.Fprintf(&b, "  http      %s (/healthz)\n", httpAddr)
	}
	fmt.Fprintf(&b, "Watching runs; Ctrl-C stops everything.")
	v.printf("%s", b.String())
}

func (v *devView) deposit(tx common.Hash, amount *big.Int) {
	amt := formatEther(amount)
	if v.tty {
		v.printf("%s %s deposit %s ETH  %s", v.stamp(time.Now()), v.color(ansiCyan, "⛓"), amt, v.color(ansiDim, short(tx.Hex(), 12)))
		return
	}
	v.printf("%s chain deposit amount=%s tx=%s", v.stamp(time.Now()), amt, tx.Hex())
}

// notify keeps a notification for the line of the step that sent it.
func (v *devView) notify(key, text string) {
	v.notesMu.Lock()
	defer v.notesMu.Unlock()
	if v.notes == nil || len(v.notes) >= maxNotes {
		v.notes = map[string][]string{}
	}
	v.notes[key] = append(v.notes[key], text)
}

// takeNotes returns and forgets the notifications a step sent.
func (v *devView) takeNotes(run uuid.UUID, step string) []string {
	v.notesMu.Lock()
	defer v.notesMu.Unlock()
	key := run.String() + ":" + step
	n := v.notes[key]
	delete(v.notes, key)
	return n
}

// formatEther prints wei as ether with up to 4 decimals.
func formatEther(wei *big.Int) string {
	r := new(big.Rat).SetFrac(wei, big.NewInt(weiPerEther))
	return strings.TrimRight(strings.TrimRight(r.FloatString(4), "0"), ".")
}

// shortID is the short run id `runs show|retry|cancel` accept.
func shortID(id uuid.UUID) string { return store.ShortID(id) }

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// watchedRun is what the view has already printed about a run.
type watchedRun struct {
	status string
	steps  map[string]string // step key → last printed status
}

// watch polls the journal every 300ms and prints what changed, until ctx
// ends. Only runs claimed since the view started are shown.
func (v *devView) watch(ctx context.Context, pool *pgxpool.Pool, since time.Time) {
	seen := map[uuid.UUID]*watchedRun{}
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		if err := v.poll(ctx, pool, since, seen); err != nil && ctx.Err() == nil {
			v.printf("%s live view: %v", v.stamp(time.Now()), err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (v *devView) poll(ctx context.Context, pool *pgxpool.Pool, since time.Time, seen map[uuid.UUID]*watchedRun) error {
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 100})
	if err != nil {
		return err
	}
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		r := runs[i]
		w := seen[r.ID]
		if w == nil {
			if r.CreatedAt.Before(since.Add(-time.Second)) {
				continue
			}
			w = &watchedRun{steps: map[string]string{}}
			seen[r.ID] = w
			v.claimed(r)
		}
		if store.RunTerminal(w.status) {
			continue
		}
		steps, err := store.RunSteps(ctx, pool, r.ID)
		if err != nil {
			return err
		}
		var changed []*store.StepRun
		for _, s := range steps {
			if w.steps[s.Key] != s.Status && settledStep(s.Status) {
				w.steps[s.Key] = s.Status
				changed = append(changed, s)
			}
		}
		slices.SortStableFunc(changed, func(a, b *store.StepRun) int { return stepTime(a).Compare(stepTime(b)) })
		for _, s := range changed {
			v.step(r, s)
		}
		if r.Status != w.status {
			w.status = r.Status
			if store.RunTerminal(r.Status) || strings.HasPrefix(r.Status, "waiting") {
				v.runStatus(r)
			}
		}
	}
	// Forget finished runs that fell out of the window.
	if len(seen) > 500 {
		keep := map[uuid.UUID]bool{}
		for _, r := range runs {
			keep[r.ID] = true
		}
		for id := range seen {
			if !keep[id] {
				delete(seen, id)
			}
		}
	}
	return nil
}

// stepTime is when a step last changed, as far as the journal says.
func stepTime(s *store.StepRun) time.Time {
	switch {
	case s.FinishedAt != nil:
		return *s.FinishedAt
	case s.StartedAt != nil:
		return *s.StartedAt
	}
	return s.CreatedAt
}

func settledStep(status string) bool {
	switch status {
	case store.StepCompleted, store.StepFailed, store.StepSkipped, store.StepRetrying, store.StepWaiting, store.StepCancelled:
		return true
	}
	return false
}

func (v *devView) claimed(r *store.Run) {
	if v.tty {
		v.printf("%s %s %s %s  claimed  %s", v.stamp(r.CreatedAt), v.color(ansiCyan, "▸"), v.color(ansiBold, r.Workflow),
			v.color(ansiDim, shortID(r.ID)), v.color(ansiDim, short(r.TriggerKey, 40)))
		return
	}
	v.printf("%s run=%s workflow=%s claimed key=%s", v.stamp(r.CreatedAt), r.ID, r.Workflow, r.TriggerKey)
}

func (v *devView) step(r *store.Run, s *store.StepRun) {
	at := stepTime(s)
	took := ""
	if s.StartedAt != nil && s.FinishedAt != nil {
		took = s.FinishedAt.Sub(*s.StartedAt).Round(time.Millisecond).String()
	}
	errText := ""
	if s.Error != nil {
		errText = oneLine(*s.Error, 80)
	}
	if v.tty {
		mark := map[string]string{
			store.StepCompleted: v.color(ansiGreen, "✓"), store.StepFailed: v.color(ansiRed, "✗"),
			store.StepSkipped: v.color(ansiDim, "↷"), store.StepRetrying: v.color(ansiYell, "↻"),
			store.StepWaiting: v.color(ansiYell, "…"), store.StepCancelled: v.color(ansiDim, "⊘"),
		}[s.Status]
		detail := took
		if s.Status != store.StepCompleted {
			detail = strings.TrimSpace(s.Status + " " + errText)
		}
		v.printf("%s     %s %-12s %s", v.stamp(at), mark, s.Key, v.color(ansiDim, detail))
		for _, n := range v.takeNotes(r.ID, s.Key) {
			v.printf("%s       %s %s", v.stamp(at), v.color(ansiYell, "✉"), n)
		}
		return
	}
	line := fmt.Sprintf("%s run=%s step=%s %s", v.stamp(at), r.ID, s.Key, s.Status)
	if took != "" {
		line += " took=" + took
	}
	if errText != "" {
		line += fmt.Sprintf(" error=%q", errText)
	}
	for _, n := range v.takeNotes(r.ID, s.Key) {
		line += fmt.Sprintf(" notify=%q", n)
	}
	v.printf("%s", line)
}

func (v *devView) runStatus(r *store.Run) {
	at := r.UpdatedAt
	took := ""
	if r.FinishedAt != nil {
		at = *r.FinishedAt
		took = r.FinishedAt.Sub(r.CreatedAt).Round(time.Millisecond).String()
	}
	errText := ""
	if r.Error != nil {
		errText = oneLine(*r.Error, 80)
	}
	if v.tty {
		mark, word := v.color(ansiYell, "…"), r.Status
		switch r.Status {
		case store.RunCompleted:
			mark, word = v.color(ansiGreen, "✓"), v.color(ansiGreen, "completed")
		case store.RunFailed:
			mark, word = v.color(ansiRed, "✗"), v.color(ansiRed, "failed")
		case store.RunCancelled:
			mark = v.color(ansiDim, "⊘")
		}
		detail := strings.TrimSpace(took + " " + errText)
		if took != "" {
			detail = "in " + detail
		}
		v.printf("%s %s %s %s  %s %s", v.stamp(at), mark, v.color(ansiBold, r.Workflow), v.color(ansiDim, shortID(r.ID)),
			word, v.color(ansiDim, detail))
		return
	}
	line := fmt.Sprintf("%s run=%s workflow=%s %s", v.stamp(at), r.ID, r.Workflow, r.Status)
	if took != "" {
		line += " took=" + took
	}
	if errText != "" {
		line += fmt.Sprintf(" error=%q", errText)
	}
	v.printf("%s", line)
}
