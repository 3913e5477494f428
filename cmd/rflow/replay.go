package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/fault"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "re-run a workflow over a block range of history, as a rehearsal that never touches live state",
		Description: "Runs W's current definition in the project file over the logs of blocks A..B under the\n" +
			"namespaced name replay_<session>__W, with prefixed trigger keys, in a River queue only this\n" +
			"process works: live processes never claim, execute or see its runs (`rflow runs list\n" +
			"--workflow replay_<session>__W` does). The session id is printed first. Its sends are simulated\n" +
			"(as with --dry-run) unless --live-sends is given; live sends count against the workflow's live\n" +
			"budgets, so a replay can never spend beyond them. `rflow replay prune` deletes sessions.\n" +
			"See docs/rehearsals.md.",
		Flags: []cli.Flag{
			configFlag(), outputFlag(),
			&cli.StringFlag{Name: "workflow", Aliases: []string{"w"}, Usage: "the workflow to replay (an event-triggered workflow of the project file)"},
			&cli.Int64Flag{Name: "from-block", Usage: "first block of the range"},
			&cli.Int64Flag{Name: "to-block", Usage: "last block of the range (inclusive)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "simulate every send (recorded as status simulated); nothing is signed or broadcast (the default without --live-sends)"},
			&cli.BoolFlag{Name: "live-sends", Usage: "sign and broadcast the replay's sends for real; they count against the workflow's live budgets (same caps, same windows)"},
			&cli.BoolFlag{Name: "skip-http", Usage: "record http_call and notify steps as skipped instead of making the requests"},
			&cli.StringFlag{Name: "session", Usage: "session id (default: a random one); lower-case letters, digits and -"},
			&cli.IntFlag{Name: "workers", Value: 50, Usage: "step jobs worked at once"},
		},
		Subcommands: []*cli.Command{replayPruneCommand()},
		Action:      replay,
	}
}

// replaySummary is what `rflow replay -o json` prints when it ends.
type replaySummary struct {
	Session   string `json:"session"`
	Workflow  string `json:"workflow"`
	Rehearsal string `json:"rehearsal_workflow"`
	FromBlock int64  `json:"from_block"`
	ToBlock   int64  `json:"to_block"`
	// DryRun is true unless the replay was asked for --live-sends.
	DryRun    bool `json:"dry_run"`
	LiveSends bool `json:"live_sends"`
	SkipHTTP  bool `json:"skip_http"`
	chain.ReplayProgress
	// Statuses counts the session's runs by status when the replay ended.
	Statuses map[store.RunStatus]int64 `json:"statuses"`
	// Complete is false when the replay was stopped (Ctrl-C) before every
	// run settled; the rest stay parked in the session's queue.
	Complete bool    `json:"complete"`
	Seconds  float64 `json:"seconds"`
	// Paused says why the rehearsal was paused (its circuit breaker
	// tripped); its later claims then wait, unstarted.
	Paused string `json:"paused,omitempty"`
}

func replay(c *cli.Context) error {
	if c.NArg() > 0 {
		return unknownCommand(c.Command.Subcommands, "replay", c.Args().First())
	}
	if err := checkOutput(c); err != nil {
		return err
	}
	name := c.String("workflow")
	switch {
	case name == "":
		return usagef("--workflow is required: the workflow to replay")
	case !c.IsSet("from-block") || !c.IsSet("to-block"):
		return usagef("--from-block and --to-block are required: the block range to replay")
	case c.Int64("from-block") < 0 || c.Int64("to-block") < c.Int64("from-block"):
		return usagef("--from-block %d --to-block %d: want 0 <= from-block <= to-block", c.Int64("from-block"), c.Int64("to-block"))
	}
	if c.Bool("live-sends") && c.Bool("dry-run") {
		return usagef("--live-sends and --dry-run exclude each other: --live-sends broadcasts the sends, --dry-run simulates them")
	}
	if err := checkWorkers(c); err != nil {
		return err
	}
	session := c.String("session")
	if session == "" {
		session = newSession()
	} else if err := store.ValidSession(session); err != nil {
		return usagef("--session: %v", err)
	}
	// The project's warnings after the session line, which comes first.
	project, err := loadProjectFile(c, workflow.LoadOptions{})
	if err != nil {
		return err
	}
	wf := project.Workflow(name)
	if wf == nil {
		return usagef("--workflow %s: no such workflow in %s (it has: %s)", name, c.String("config"), strings.Join(workflowNames(project), ", "))
	}
	if wf.Trigger.Event == nil {
		return usagef("--workflow %s has a %s trigger: only event-triggered workflows can be replayed over blocks", name, wf.Trigger.Kind)
	}
	// Warnings and errors only (unless --log-level): the progress is the
	// replay's output.
	logger := viewLogger(c, c.App.ErrWriter)
	db, err := openMigrated(c, project.Name, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	// The rehearsal is of the project's own workflow (its live budgets,
	// with --live-sends), under its stored name; a replay registers no
	// project.
	ns, err := readNamespace(c.Context, db.Pool, project.Name)
	if err != nil {
		return err
	}
	// The session before any rehearsal row is written, so an interrupted
	// replay can still be found and pruned (but after the checks: a replay
	// that cannot start announces no session); on stderr under -o json,
	// which keeps stdout one document.
	r := store.Rehearsal{Kind: store.RehearsalReplay, Session: session, Workflow: ns.Qualify(name)}
	sum := replaySummary{Session: session, Workflow: name, Rehearsal: r.Name(), FromBlock: c.Int64("from-block"),
		ToBlock: c.Int64("to-block"), DryRun: !c.Bool("live-sends"), LiveSends: c.Bool("live-sends"), SkipHTTP: c.Bool("skip-http")}
	sessionOut := c.App.Writer
	if c.String("output") == "json" {
		sessionOut = c.App.ErrWriter
	}
	fmt.Fprintf(sessionOut, "replay session %s: %s as %s, blocks %d..%d%s\n", session, name, r.Name(), sum.FromBlock, sum.ToBlock,
		map[bool]string{true: " (dry run: sends are simulated; --live-sends broadcasts them)", false: " (live sends, counted against the live budgets)"}[sum.DryRun])
	printWarnings(c, project)
	backends, release, err := jobs.DialBackends(c.Context, project, logger)
	if err != nil {
		return err
	}
	defer release()
	engine, err := jobs.NewEngine(jobs.Config{
		Pool: db.Pool, URL: db.URL, Project: project, Logger: logger, Backends: backends, Workers: c.Int("workers"),
		Faults: fault.Parse(os.Getenv(fault.Env)), DryRun: sum.DryRun, Namespace: ns,
		Rehearsal: &jobs.Rehearsal{Rehearsal: r, SkipHTTP: sum.SkipHTTP},
	})
	if err != nil {
		return err
	}
	if _, err := engine.DeployRehearsal(c.Context, wf); err != nil {
		return err
	}
	cfg, err := engine.RehearsalChainConfig(wf)
	if err != nil {
		return err
	}
	svc, err := chain.NewService(c.Context, db.Pool, engine.RehearsalClaimer(), cfg, logger)
	if err != nil {
		return err
	}
	defer svc.Close()
	// Work gets its own context: a Ctrl-C stops reading and waiting, then
	// lets steps in flight reach their journal.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(c.Context))
	defer stopWork()
	if err := engine.Start(workCtx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), 10*time.Second)
		defer cancel()
		if err := engine.Stop(sctx); err != nil {
			logger.Warn("replay: stopping the engine", "err", err)
		}
	}()

	start := time.Now()
	prog := newReplayProgress(c, sum.ToBlock-sum.FromBlock+1)
	sum.ReplayProgress, err = svc.Replay(c.Context, sum.FromBlock, sum.ToBlock, chain.ReplayOptions{Progress: prog.read})
	if err != nil && c.Context.Err() == nil {
		prog.done()
		return err
	}
	sum.Complete, err = settle(c.Context, db, r.Name(), sum.Runs, prog)
	prog.done()
	if err != nil && c.Context.Err() == nil {
		return err
	}
	sum.Complete = sum.Complete && c.Context.Err() == nil
	sum.Seconds = time.Since(start).Seconds()
	if wf, err := store.GetWorkflow(context.WithoutCancel(c.Context), db.Pool, r.Name()); err == nil && wf.Paused {
		sum.Paused = wf.PausedReason
	}
	if sum.Statuses, err = store.RunCounts(context.WithoutCancel(c.Context), db.Pool, r.Name()); err != nil {
		return err
	}
	return printReplaySummary(c, sum)
}

// settle waits until every run of the rehearsal has settled: finished, or
// parked on something only the outside world ends (an event, an
// approval, or a resume of the rehearsal its circuit breaker paused).
// Delays and sends in flight are waited out.
func settle(ctx context.Context, db *database, name string, claimed int64, prog *replayProgress) (bool, error) {
	for {
		counts, err := store.RunCounts(ctx, db.Pool, name)
		if err != nil {
			return false, err
		}
		wf, err := store.GetWorkflow(ctx, db.Pool, name)
		if err != nil {
			return false, err
		}
		var open int64
		for s, n := range counts {
			held := wf.Paused && (s == store.RunQueued || s == store.RunThrottled)
			if !s.Terminal() && s != store.RunWaitingEvent && s != store.RunWaitingApproval && !held {
				open += n
			}
		}
		prog.settling(claimed-open, claimed)
		if open == 0 {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func printReplaySummary(c *cli.Context, sum replaySummary) error {
	if ok, err := printJSON(c, sum); ok || err != nil {
		return err
	}
	w := c.App.Writer
	state := "done"
	if !sum.Complete {
		state = "stopped before every run settled"
	}
	fmt.Fprintf(w, "replay %s %s: %d block(s), %d log(s), %d run(s) in %.1fs\n", sum.Session, state, sum.Blocks, sum.Logs, sum.Runs, sum.Seconds)
	for _, s := range store.RunStatuses() {
		if n := sum.Statuses[s]; n > 0 {
			fmt.Fprintf(w, "  %-17s %d\n", s, n)
		}
	}
	if sum.Paused != "" {
		fmt.Fprintf(w, "the rehearsal was paused (%s): runs claimed after that did not start\n", sum.Paused)
	}
	fmt.Fprintf(w, "see them: rflow runs list --workflow %s\nremove them: rflow replay prune --session %s\n", sum.Rehearsal, sum.Session)
	return nil
}

// newSession is a fresh random session id: 8 hex digits.
func newSession() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func workflowNames(p *workflow.Project) []string {
	out := make([]string, 0, len(p.Workflows))
	for _, w := range p.Workflows {
		out = append(out, w.Name)
	}
	slices.Sort(out)
	return out
}
