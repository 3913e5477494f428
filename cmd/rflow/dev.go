package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/examples/quickstart"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run the quickstart example on an embedded Postgres and an embedded dev chain",
		Description: "Starts an embedded Postgres (data in $XDG_DATA_HOME/rflow/<project>, else ~/.local/share/rflow/<project>,\n" +
			"or /var/lib/rflow/<project> as root), a dev chain that emits Deposit events, and the examples/quickstart\n" +
			"workflows (project quickstart; its copy in <data>/rflow/quickstart/project keeps your edits), or with --project\n" +
			"your project's, and prints runs as they go. A saved edit of any project file, rflow.yaml included, reloads the\n" +
			"whole project as a new generation, or is refused with its problems at file:line:col while the old one runs on.\n" +
			"--database-url uses your database instead. --rpc uses your node instead of the dev chain: the\n" +
			"Emitter contract is deployed there with anvil's first dev key (the node must fund it), unless\n" +
			"--contract (or RFLOW_DEV_CONTRACT) names an Emitter already deployed, which is then only watched\n" +
			"(and RFLOW_DEV_WALLET_KEY must name a funded key for the send step).\n" +
			"Commands typed later with no -c where there is no rflow.yaml (runs list, approve, …) use the embedded\n" +
			"database of the project rflow dev last ran.\n" +
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
			readyStallFlag(),
			&cli.StringFlag{Name: "project", Usage: "run your project (a directory with rflow.yaml, or the file) instead of the quickstart; " +
				"its ${RFLOW_DEV_*} references name the dev chain and endpoint, as `rflow init` writes them"},
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
	if err := checkWorkers(c); err != nil {
		return err
	}
	if c.Duration("emit-every") <= 0 {
		return usagef("--emit-every must be positive")
	}
	switch b := c.String("chain"); b {
	case devchain.BackendAuto, devchain.BackendSimulated, devchain.BackendAnvil:
	default:
		return usagef("--chain %q: use auto, simulated or anvil", b)
	}
	outage := &dbOutage{}
	view := newDevView(c.App.Writer)
	view.quiet = outage.quiet
	logger := liveLogger(c, view, outage)
	ctx := c.Context

	// The port before anything else: taken, it is the one thing to fix.
	ln, err := listenHTTP(c.String("http"))
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close()
	}
	endpoint, err := startDevEndpoint(view)
	if err != nil {
		return err
	}
	defer endpoint.Close()

	src, err := devProjectSource(c.String("project"))
	if err != nil {
		return err
	}

	// The database first: the first start initialises it, which takes a
	// while, and the dev chain's deposits should not pile up meanwhile.
	db, err := openDatabase(c, src.name, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := ownEmbedded(db, src.name); err != nil {
		return err
	}
	if db.Embedded != nil {
		// Commands typed afterwards with no -c (runs list, approve) find
		// this database; a session on --database-url has none to find.
		if err := rememberDevProject(src.name); err != nil {
			logger.Warn("commands without -c will not find this project's database", "err", err)
		}
	}
	fatal := superviseDatabase(ctx, db, outage, view.say)

	ch, err := startDevChain(ctx, c, view, logger)
	if err != nil {
		return err
	}
	defer ch.close()

	path, kept := src.path, false
	if path == "" {
		if path, kept, err = quickstartCopy(); err != nil {
			return err
		}
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
	load := func() (*workflow.Project, error) {
		return workflow.Load(path, workflow.LoadOptions{LookupEnv: func(k string) (string, bool) {
			if v, ok := vars[k]; ok {
				return v, true
			}
			return os.LookupEnv(k)
		}})
	}
	project, err := load()
	switch {
	case err != nil && src.path != "":
		return err
	case err != nil:
		return fmt.Errorf("the embedded quickstart project does not load: %w", err)
	case project.Name != src.name:
		return fmt.Errorf("%s is named %q, want %q", src.desc, project.Name, src.name)
	}

	discarded, err := discardPreviousDevChain(ctx, db, ch, project)
	if err != nil {
		return err
	}

	token := newDevToken(os.Getenv("RFLOW_API_TOKEN"))
	dir := filepath.Dir(path)
	view.banner(project, src.desc, dir, db, ch, endpoint.url, ln)
	if src.path == "" {
		how := "written for this session"
		if kept {
			how = "as you left it"
		}
		view.printf("quickstart files in %s, %s: they stay between sessions (delete the folder for the original)", dir, how)
	}
	if discarded.Discarded {
		view.printf("new dev chain: the previous session's chain is gone; its %d runs stay in history, %d in-flight runs were ended",
			discarded.Runs, discarded.Ended)
	}
	view.useProject(project)
	ready, stopView := view.follow(ctx, db.Pool, panelTitle("rflow dev", project.Name))
	defer stopView()
	check := func(ctx context.Context, p *workflow.Project) error {
		if err := checkNetworks(ctx, p, logger); err != nil {
			return err
		}
		return checkInFlight(ctx, db.Pool, p)
	}
	gens := &devGenerations{
		base: engineOptions{db: db, logger: logger, listener: ln, apiToken: token.value, loopbackLogin: loopback(ln), fatal: fatal,
			outage: supervisedOutage(db, outage), say: view.say,
			workers:  c.Int("workers"),
			shutdown: 5 * time.Second, stdout: c.App.Writer, readyStall: c.Duration("ready-stall"),
			sessions: console.NewSessions(0)}, // a reload logs nobody out of the console
		watch: newProjectWatch(dir, load, check, view),
		view:  view,
		first: func(e *jobs.Engine) {
			ready(e)
			if ln != nil {
				view.printf("console %s (%s)", consoleURL(ln.Addr().String()), token.hint(loopback(ln)))
			}
		},
	}
	return gens.run(ctx, project)
}

// consoleURL is where a browser on this machine opens the console served
// on addr (an address without a host listens on every interface).
func consoleURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/ui/"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/ui/"
}

// devToken is the API token of a dev session: RFLOW_API_TOKEN when set,
// else a fresh random one, so the console can be logged into on the first
// command.
type devToken struct {
	value     string
	generated bool
}

func newDevToken(env string) devToken {
	if env != "" {
		return devToken{value: env}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return devToken{value: hex.EncodeToString(b), generated: true}
}

// hint tells the developer what to log in with. A generated token is
// printed: it lives only as long as this dev session and its local
// database; a token of your own never is. On a loopback address a browser
// on this machine needs no login; the API (and anyone else) still needs
// the token.
func (t devToken) hint(loopback bool) string {
	what := "log in with"
	if loopback {
		what = "opens without a login on this machine; API"
	}
	if t.generated {
		return what + " token " + t.value + "; set RFLOW_API_TOKEN to choose one"
	}
	return what + " $RFLOW_API_TOKEN"
}

// loopback reports whether ln listens on a loopback address only (not on
// every interface).
func loopback(ln net.Listener) bool {
	if ln == nil {
		return false
	}
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// quickstartCopy is where rflow dev keeps its copy of the quickstart: in
// the folder of the project's embedded database, whatever database the
// session uses, so edits outlive the session. Files missing there are
// written; kept reports whether every one was there already.
func quickstartCopy() (path string, kept bool, err error) {
	base, err := embeddedDataDir(quickstartName)
	if err != nil {
		return "", false, err
	}
	path, written, err := quickstart.WriteMissing(filepath.Join(base, "project"))
	return path, written == 0, err
}

// quickstartName is the quickstart project's name: it keys the embedded
// database's data directory, which is opened before the project is loaded.
const quickstartName = "quickstart"

// devSource is the project rflow dev runs: the embedded quickstart (path
// empty) or the user's project file.
type devSource struct {
	path string
	name string // keys the embedded database's data directory
	desc string // for the banner and messages
}

// devProjectSource resolves --project: a directory holding rflow.yaml, or
// a project file.
func devProjectSource(project string) (devSource, error) {
	if project == "" {
		return devSource{name: quickstartName, desc: "examples/quickstart"}, nil
	}
	path := project
	if fi, err := os.Stat(project); err != nil {
		return devSource{}, usagef("--project %s: %v (create one with: rflow init %s)", project, err, project)
	} else if fi.IsDir() {
		path = filepath.Join(project, "rflow.yaml")
	}
	// The dev variables are set only once the dev chain runs; the name
	// must not depend on them.
	name, err := workflow.ProjectName(path, func(k string) (string, bool) {
		if strings.HasPrefix(k, "RFLOW_DEV_") {
			return "", true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		return devSource{}, fmt.Errorf("--project: %w", err)
	}
	return devSource{path: path, name: name, desc: path}, nil
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
	// embedded is a dev chain rflow dev started: new on every start.
	embedded bool
	close    func()
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
			walletKey: ch.WalletKey, embedded: true, close: func() { _ = ch.Close() }}, nil
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

// The chain ids of the chains rflow dev embeds: go-ethereum's simulated
// backend and anvil.
const (
	simulatedChainID = 1337
	anvilChainID     = 31337
)

// retiredGenesis is the genesis recorded for an embedded dev chain id that
// a later session retired while it ran the other one.
const retiredGenesis = "retired by rflow dev"

// discardPreviousDevChain retires what the database knew of the previous
// session's dev chain (see jobs.DiscardChain) when ch is one rflow dev
// started: that chain is gone for good, which is no reorg. So is the other
// embedded chain, if an earlier session ran it for the same network of
// project (anvil installed since, or another --chain). With --rpc the node
// is yours and may really have reorged: the production rules apply.
func discardPreviousDevChain(ctx context.Context, db *database, ch *devChain, project *workflow.Project) (jobs.DiscardedChain, error) {
	if !ch.embedded {
		return jobs.DiscardedChain{}, nil
	}
	if _, err := store.Migrate(ctx, db.Pool, nil); err != nil {
		return jobs.DiscardedChain{}, err
	}
	client, err := ethclient.DialContext(ctx, ch.url)
	if err != nil {
		return jobs.DiscardedChain{}, fmt.Errorf("dev chain %s: %w", ch.url, err)
	}
	defer client.Close()
	// The node's own hash of block 0, as the head tracker records it
	// (not one recomputed from the header's fields).
	var genesis struct {
		Hash common.Hash `json:"hash"`
	}
	if err := client.Client().CallContext(ctx, &genesis, "eth_getBlockByNumber", "0x0", false); err != nil {
		return jobs.DiscardedChain{}, fmt.Errorf("dev chain %s: genesis: %w", ch.url, err)
	}
	out, err := jobs.DiscardChain(ctx, db.Pool, ch.chainID, genesis.Hash.Hex())
	if err != nil {
		return out, err
	}
	other := int64(anvilChainID)
	if ch.chainID == anvilChainID {
		other = simulatedChainID
	}
	known, ok, err := store.GetChainIdentity(ctx, db.Pool, other)
	if err != nil || !ok || known.Genesis == retiredGenesis || !slices.ContainsFunc(project.Networks, func(n *workflow.Network) bool {
		return n.Name == known.Network && int64(n.ChainID) == ch.chainID
	}) {
		return out, err
	}
	retired, err := jobs.DiscardChain(ctx, db.Pool, other, retiredGenesis)
	if err != nil {
		return out, err
	}
	out.Discarded = true
	out.Runs += retired.Runs
	out.Ended += retired.Ended
	return out, nil
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

// weiPerEther scales amounts for the dev endpoint's rating.
const weiPerEther = 1e18
