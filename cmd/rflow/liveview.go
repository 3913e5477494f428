package main

import (
	"context"
	"encoding/json"
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

// follow returns the engine's ready hook, which starts the view on pool,
// and a stop that ends the view and waits for it. When ctx ends (the first
// Ctrl-C) the view says the engine is stopping.
func (v *devView) follow(ctx context.Context, pool *pgxpool.Pool) (ready func(*jobs.Engine), stop func()) {
	started := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ready = func(*jobs.Engine) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.watch(watchCtx, pool, started)
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
			w = &watchedRun{steps: map[string]store.StepStatus{}}
			seen[r.ID] = w
			v.claimed(r)
		}
		if w.status.Terminal() {
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
			if r.Status.Terminal() || r.Status.Waiting() {
				v.runStatus(r)
			}
			if r.Status == store.RunWaitingApproval {
				aps, err := store.ListApprovals(ctx, pool, store.ApprovalFilter{RunID: r.ID, Status: store.ApprovalPending})
				if err != nil {
					return err
				}
				for _, a := range aps {
					v.approvalWaiting(a)
				}
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

func settledStep(status store.StepStatus) bool {
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
		mark := map[store.StepStatus]string{
			store.StepCompleted: v.color(ansiGreen, "✓"), store.StepFailed: v.color(ansiRed, "✗"),
			store.StepSkipped: v.color(ansiDim, "↷"), store.StepRetrying: v.color(ansiYell, "↻"),
			store.StepWaiting: v.color(ansiYell, "…"), store.StepCancelled: v.color(ansiDim, "⊘"),
		}[s.Status]
		detail := took
		if s.Status != store.StepCompleted {
			detail = strings.TrimSpace(string(s.Status) + " " + errText)
		}
		if hash := sentHash(s); hash != "" {
			detail = strings.TrimSpace(detail + " tx " + short(hash, 12) + " " + s.SentValue())
		}
		v.printf("%s     %s %-12s %s", v.stamp(at), mark, s.Key, v.color(ansiDim, detail))
		for _, n := range v.takeNotes(r.ID, s.Key) {
			v.printf("%s       %s %s", v.stamp(at), v.color(ansiYell, "✉"), n)
		}
		return
	}
	line := plainLine(fmt.Sprintf("%s run=%s step=%s %s", v.stamp(at), r.ID, s.Key, s.Status), took, errText)
	if hash := sentHash(s); hash != "" {
		line += " tx=" + hash
		if value := s.SentValue(); value != "" {
			line += fmt.Sprintf(" value=%q", value)
		}
	}
	for _, n := range v.takeNotes(r.ID, s.Key) {
		line += fmt.Sprintf(" notify=%q", n)
	}
	v.printf("%s", line)
}

// sentHash is the transaction hash a send step's output records (empty for
// other steps, and for a send not yet mined).
func sentHash(s *store.StepRun) string {
	if len(s.Output) == 0 {
		return ""
	}
	var out struct {
		Hash string `json:"hash"`
	}
	if json.Unmarshal(s.Output, &out) != nil {
		return ""
	}
	return out.Hash
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
		mark, word := v.color(ansiYell, "…"), string(r.Status)
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
	v.printf("%s", plainLine(fmt.Sprintf("%s run=%s workflow=%s %s", v.stamp(at), r.ID, r.Workflow, r.Status), took, errText))
}

// plainLine appends the duration and error of a key=value line.
func plainLine(line, took, errText string) string {
	if took != "" {
		line += " took=" + took
	}
	if errText != "" {
		line += fmt.Sprintf(" error=%q", errText)
	}
	return line
}

// approvalWaiting says what a pending approval would send and how to
// decide it.
func (v *devView) approvalWaiting(a *store.Approval) {
	short := store.ShortID(a.ID)
	if v.tty {
		v.printf("%s       %s %s  approve: rflow approve %s | reject: rflow reject %s --reason R",
			v.stamp(a.CreatedAt), v.color(ansiYell, "?"), oneLine(summaryLine(a), 80), short, short)
		return
	}
	v.printf("%s run=%s step=%s approval=%s pending summary=%q approve=%q reject=%q", v.stamp(a.CreatedAt), a.RunID, a.StepKey,
		a.ID, summaryLine(a), "rflow approve "+short, "rflow reject "+short+" --reason R")
}
