package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/units"
	"github.com/rflow-dev/rflow/workflow"
)

// devView prints the live view: runs as they are claimed, step by step, and
// completed. On a terminal it is tidy (symbols, colors, short ids); otherwise
// it is plain key=value lines, one event per line, for logs and tests.
type devView struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	// quiet, when set, says the view's own database errors are not worth
	// a line now (the embedded database is down, and said so).
	quiet func() bool

	// guards names how each workflow holds runs back ("throttled",
	// "rate-limited"), networks each chain id's network: from the project.
	guards   map[string]string
	networks map[int64]string

	// panel is the status panel a terminal shows below the lines
	// (liveview_panel.go); drawn is how many of its lines are on screen.
	panel []string
	drawn int

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
	return &devView{w: w, tty: isTerminal(w)}
}

// useProject tells the view the project it shows: the names of its
// networks and how each workflow's guards hold runs back.
func (v *devView) useProject(p *workflow.Project) {
	guards, networks := map[string]string{}, map[int64]string{}
	for _, wf := range p.Workflows {
		switch {
		case wf.Throttle != nil:
			guards[wf.Name] = "throttled"
		case wf.RateLimit != nil:
			guards[wf.Name] = "rate-limited"
		case wf.Concurrency != nil:
			guards[wf.Name] = "held by its concurrency limit"
		}
	}
	for _, n := range p.Networks {
		networks[int64(n.ChainID)] = n.Name
	}
	v.mu.Lock()
	v.guards, v.networks = guards, networks
	v.mu.Unlock()
}

// heldWord says how workflow's guards hold a throttled run back.
func (v *devView) heldWord(workflow string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.guards[workflow]; w != "" {
		return w
	}
	return "throttled"
}

// networkName names chain id's network (or says its chain id).
func (v *devView) networkName(chainID int64) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if n := v.networks[chainID]; n != "" {
		return n
	}
	return fmt.Sprintf("chain %d", chainID)
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
	if !v.tty || os.Getenv("NO_COLOR") != "" || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (v *devView) printf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.erasePanel()
	// A line's last field may be empty (no error, no duration).
	fmt.Fprintln(v.w, strings.TrimRight(fmt.Sprintf(format, args...), " "))
	v.drawPanel()
}

// say prints one line of the view's own (a database outage, say), stamped
// now.
func (v *devView) say(s string) {
	v.printf("%s %s", v.stamp(time.Now()), s)
}

func (v *devView) stamp(t time.Time) string {
	if v.tty {
		return v.color(ansiDim, t.Local().Format("15:04:05"))
	}
	return t.UTC().Format("15:04:05.000")
}

func (v *devView) banner(p *workflow.Project, source, dir string, db *database, ch *devChain, endpoint string, http net.Listener) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s project %s (%s, %d workflow(s))\n", v.color(ansiBold, "rflow dev"), p.Name, source, len(p.Workflows))
	databaseLines(&b, db)
	fmt.Fprintf(&b, "  chain     %s, chain id %d, %s\n", ch.desc, ch.chainID, ch.url)
	fmt.Fprintf(&b, "  contract  Emitter at %s\n", ch.contract.Hex())
	fmt.Fprintf(&b, "  endpoint  %s/dev/echo, %s/dev/notify\n", endpoint, endpoint)
	httpLine(&b, http)
	fmt.Fprintf(&b, "  files     %s (edit them: a change is deployed as a new generation)\n", dir)
	fmt.Fprintf(&b, "Watching runs; Ctrl-C stops everything.")
	v.printf("%s", b.String())
}

// startBanner is what `rflow start` prints above its live view.
func (v *devView) startBanner(p *workflow.Project, db *database, http net.Listener) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s project %s (%d workflow(s))\n", v.color(ansiBold, "rflow start"), p.Name, len(p.Workflows))
	databaseLines(&b, db)
	httpLine(&b, http)
	fmt.Fprintf(&b, "Watching runs; Ctrl-C stops (waits for steps in flight), a second Ctrl-C exits at once.")
	v.printf("%s", b.String())
}

// databaseLines name the database, with a URL that read commands can use
// (rflow --database-url URL runs list) and no password in it.
func databaseLines(b *strings.Builder, db *database) {
	if db.Embedded != nil {
		fmt.Fprintf(b, "  postgres  embedded, pid %d, data in %s\n", db.Embedded.Pid(), db.Embedded.DataDir())
	} else {
		fmt.Fprintf(b, "  postgres  your database (--database-url)\n")
	}
	fmt.Fprintf(b, "  database  %s\n", redact.URL(db.URL))
}

func httpLine(b *strings.Builder, http net.Listener) {
	if http != nil {
		fmt.Fprintf(b, "  http      %s (/healthz, /v1, /ui/, /metrics, /riverui/ with RFLOW_API_TOKEN)\n", http.Addr())
	}
}

// follow returns the engine's ready hook, which starts the view on pool
// (and on a terminal its status panel, headed title), and a stop that ends
// the view and waits for it. When ctx ends (the first Ctrl-C) the view
// says the engine is stopping.
func (v *devView) follow(ctx context.Context, pool *pgxpool.Pool, title string) (ready func(*jobs.Engine), stop func()) {
	started := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ready = func(e *jobs.Engine) {
		wg.Add(2)
		go func() { defer wg.Done(); v.runPanel(watchCtx, pool, e.Namespace(), title) }()
		go func() {
			defer wg.Done()
			v.watch(watchCtx, pool, e.Namespace(), started)
			if ctx.Err() != nil {
				v.printf("%s stopping: no new runs; waiting for steps in flight (Ctrl-C again to exit at once)", v.stamp(time.Now()))
			}
		}()
	}
	return ready, func() { stopWatch(); wg.Wait() }
}

// reloaded says what a reload of the project's files deployed.
func (v *devView) reloaded(file string, d store.Deployed) {
	if v.tty {
		v.printf("%s %s reloaded %s: %s generation %d", v.stamp(time.Now()), v.color(ansiCyan, "⟳"), file, v.color(ansiBold, d.Name), d.Generation)
		return
	}
	v.printf("%s reloaded %s: workflow=%s generation %d", v.stamp(time.Now()), file, d.Name, d.Generation)
}

// reloadFailed prints why a changed file was not deployed; the previous
// generation keeps running.
func (v *devView) reloadFailed(file string, err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s not reloaded %s (the previous generation keeps running): ", v.stamp(time.Now()), v.color(ansiRed, "✗"), file)
	var ds workflow.Diagnostics
	if errors.As(err, &ds) {
		fmt.Fprintf(&b, "%d problem(s)", len(ds.Errors()))
		for _, d := range ds {
			fmt.Fprintf(&b, "\n    %s", d.String())
		}
	} else {
		b.WriteString(err.Error())
	}
	v.printf("%s", b.String())
}

func (v *devView) deposit(tx common.Hash, amount *big.Int) {
	amt := units.Ether().Format(amount) // the dev chain pays in ETH
	if v.tty {
		v.printf("%s %s deposit %s  %s", v.stamp(time.Now()), v.color(ansiCyan, "⛓"), amt, v.color(ansiDim, short(tx.Hex(), 12)))
		return
	}
	v.printf("%s chain deposit amount=%q tx=%s", v.stamp(time.Now()), amt, tx.Hex())
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
	status store.RunStatus
	steps  map[string]store.StepStatus // step key → last printed status
	// responses are its on_reorg responses' last printed statuses.
	responses map[uuid.UUID]store.RunStatus
}

// watch polls the journal every 300ms and prints what changed, until ctx
// ends. Only runs claimed since the view started are shown, and reorgs
// recorded since.
func (v *devView) watch(ctx context.Context, pool *pgxpool.Pool, ns store.Namespace, since time.Time) {
	seen := map[uuid.UUID]*watchedRun{}
	lastReorg, err := store.LatestReorgID(ctx, pool)
	if err != nil && ctx.Err() == nil {
		v.say(fmt.Sprintf("live view: %v", err))
	}
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		err := v.pollReorgs(ctx, pool, &lastReorg)
		if err == nil {
			err = v.poll(ctx, pool, ns, since, seen)
		}
		if err != nil && ctx.Err() == nil && (v.quiet == nil || !v.quiet()) {
			v.say(fmt.Sprintf("live view: %v", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (v *devView) poll(ctx context.Context, pool *pgxpool.Pool, ns store.Namespace, since time.Time, seen map[uuid.UUID]*watchedRun) error {
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 100, Namespace: ns})
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
			w = &watchedRun{steps: map[string]store.StepStatus{}, responses: map[uuid.UUID]store.RunStatus{}}
			seen[r.ID] = w
			v.claimed(r)
		}
		if err := v.pollResponses(ctx, pool, r, w); err != nil {
			return err
		}
		if w.status.Terminal() {
			continue
		}
		if err := v.pollRun(ctx, pool, r, w); err != nil {
			return err
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

// pollRun prints what changed in one run's journal and status.
func (v *devView) pollRun(ctx context.Context, pool *pgxpool.Pool, r *store.Run, w *watchedRun) error {
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
	if r.Status == w.status {
		return nil
	}
	w.status = r.Status
	switch {
	case r.Status == store.RunThrottled:
		v.held(r)
	case r.Status.Terminal() || r.Status.Waiting():
		v.runStatus(r)
	}
	if r.Status != store.RunWaitingApproval {
		return nil
	}
	aps, err := store.ListApprovals(ctx, pool, store.ApprovalFilter{RunID: r.ID, Status: store.ApprovalPending})
	if err != nil {
		return err
	}
	for _, a := range aps {
		v.approvalWaiting(r, a)
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

func settledStep(status store.StepStatus) bool {
	switch status {
	case store.StepCompleted, store.StepFailed, store.StepSkipped, store.StepRetrying, store.StepWaiting, store.StepCancelled:
		return true
	}
	return false
}
