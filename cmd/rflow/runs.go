package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "inspect, retry and cancel runs",
		Subcommands: []*cli.Command{
			{
				Name:    "list",
				Aliases: []string{"ls"},
				Usage:   "list runs, newest first",
				Flags: []cli.Flag{
					configFlag(), outputFlag(),
					&cli.StringFlag{Name: "workflow", Usage: "only this workflow"},
					&cli.StringFlag{Name: "status", Usage: "only runs in this status (" + joinStatuses(store.RunStatuses()) + ")"},
					&cli.BoolFlag{Name: "failed", Usage: "only failed runs (the dead letter queue)"},
					&cli.BoolFlag{Name: "rehearsals", Usage: "include the runs of replays and tests (hidden unless --workflow names one)"},
					&cli.BoolFlag{Name: "compensated", Usage: "only runs a reorg orphaned and whose on_reorg response started"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most this many runs"},
					&cli.StringFlag{Name: "after", Usage: "the page after this cursor (next_cursor of -o json; a run id)"},
					&cli.BoolFlag{Name: "all", Usage: "every run, page by page (no --limit)"},
					&cli.BoolFlag{Name: "all-projects", Usage: "the runs of every project on the database, each with its project (default: this project's)"},
				},
				Action: runsList,
			},
			{
				Name: "show", Usage: "show a run and its step journal", ArgsUsage: "<run-id>",
				Flags: []cli.Flag{configFlag(), outputFlag()}, Action: runsShow,
			},
			{
				Name: "retry", Usage: "re-fire a failed run from its failed step; completed steps are not re-run",
				ArgsUsage: "<run-id>", Flags: []cli.Flag{configFlag(), outputFlag()}, Action: runsRetry,
			},
			{
				Name: "cancel", Usage: "cancel a run that has not finished", ArgsUsage: "<run-id>",
				Flags: []cli.Flag{configFlag(), outputFlag(),
					&cli.StringFlag{Name: "reason", Usage: "why: kept with the run, shown by runs show (cancel_reason in -o json)"}},
				Action: runsCancel,
			},
			runsPruneCommand(),
		},
	}
}

// runArg checks the one argument of a run command: a run id, or the short
// id the live view prints (its last store.ShortIDLen hex digits).
func runArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usagef("%s takes exactly one run id", commandPath(c))
	}
	arg := c.Args().First()
	if _, err := uuid.Parse(arg); err == nil || isShortID(arg) {
		return arg, nil
	}
	return "", usagef("%q is not a run id (a UUID, or its short id: its last %d characters, as `rflow dev` prints it)", arg, store.ShortIDLen)
}

func isShortID(s string) bool { return store.IsShortID(s) }

// resolveRun turns a run id or a short id into the run's id. An ambiguous
// short id is an error listing the runs it matches.
func resolveRun(ctx context.Context, db store.DBTX, arg string) (uuid.UUID, error) {
	if id, err := uuid.Parse(arg); err == nil {
		return id, nil
	}
	const shown = 10
	runs, err := store.RunsByShortID(ctx, db, arg, shown+1)
	if err != nil {
		return uuid.Nil, err
	}
	switch len(runs) {
	case 0:
		return uuid.Nil, cli.Exit(fmt.Sprintf("no run has the short id %s (a short id is the last %d characters of a run id; `rflow runs list` shows the ids)",
			arg, store.ShortIDLen), exitFailure)
	case 1:
		return runs[0].ID, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "short id %s matches more than one run; give the full id:", arg)
	for i, r := range runs {
		if i == shown {
			b.WriteString("\n  …")
			break
		}
		fmt.Fprintf(&b, "\n  %s  %s  %s  %s", r.ID, r.Workflow, r.Status, r.CreatedAt.UTC().Format(time.RFC3339))
	}
	return uuid.Nil, cli.Exit(b.String(), exitFailure)
}

// listPage is the batch size of runs list --all.
const listPage = 1000

// runList is runs list's -o json: a page of runs and the cursor of the
// next one (absent on the last page).
type runList struct {
	Runs       []*server.Run `json:"runs"`
	NextCursor *uuid.UUID    `json:"next_cursor,omitempty"`
}

func runsList(c *cli.Context) error {
	if err := noArgs(c, "filter with --workflow W or --status S"); err != nil {
		return err
	}
	f := store.RunFilter{Workflow: c.String("workflow"), Status: store.RunStatus(c.String("status")), Limit: c.Int("limit"),
		Rehearsals: c.Bool("rehearsals"), Compensated: c.Bool("compensated"), AllProjects: c.Bool("all-projects")}
	if c.Bool("failed") {
		if f.Status != "" && f.Status != store.RunFailed {
			return usagef("--failed and --status %s contradict each other", f.Status)
		}
		f.Status = store.RunFailed
	}
	if f.Status != "" && !f.Status.Valid() {
		return usagef("--status %q is not a run status; use one of %s", f.Status, joinStatuses(store.RunStatuses()))
	}
	if f.Limit < 1 {
		return usagef("--limit must be at least 1")
	}
	all := c.Bool("all")
	if all && c.IsSet("limit") {
		return usagef("--all lists every run: leave out --limit")
	}
	if all {
		f.Limit = listPage
	}
	if a := c.String("after"); a != "" {
		id, err := uuid.Parse(a)
		if err != nil {
			return usagef("--after %q is not a cursor (the next_cursor of -o json, a run id)", a)
		}
		f.Before = &id
	}
	if err := checkOutput(c); err != nil {
		return err
	}
	db, err := openExisting(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	if f.Namespace, err = readNamespace(c.Context, db.Pool, fileProjectName(c)); err != nil {
		return err
	}
	var table *tabwriter.Writer
	out := runList{Runs: []*server.Run{}}
	for {
		runs, err := store.ListRuns(c.Context, db.Pool, f)
		if err != nil {
			return notFound(err)
		}
		out.NextCursor = nil
		if len(runs) == f.Limit {
			out.NextCursor = &runs[len(runs)-1].ID
		}
		if c.String("output") == "json" {
			out.Runs = append(out.Runs, server.NewRuns(runs)...)
		} else {
			// A person's table streams, page by page.
			if table == nil {
				table = tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
				if f.AllProjects {
					fmt.Fprint(table, "PROJECT\t")
				}
				fmt.Fprintln(table, "ID\tWORKFLOW\tSTATUS\tTRIGGER\tCREATED\tERROR")
			}
			printRuns(table, runs, f.AllProjects)
		}
		if !all || out.NextCursor == nil {
			break
		}
		f.Before = out.NextCursor
	}
	if table != nil {
		return table.Flush()
	}
	if all {
		out.NextCursor = nil
	}
	_, err = printJSON(c, out)
	return err
}

func printRuns(w *tabwriter.Writer, runs []*store.Run, withProject bool) {
	for _, r := range runs {
		errText := ""
		if r.Error != nil {
			errText = oneLine(*r.Error, 60)
		}
		if withProject {
			fmt.Fprintf(w, "%s\t", cmp.Or(r.Project, "-"))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Status, oneLine(r.TriggerKey, 40),
			r.CreatedAt.UTC().Format(time.RFC3339), errText)
	}
	_ = w.Flush()
}

// runDetail is `runs show -o json`: the run's API fields with its journal.
type runDetail struct {
	*server.Run
	Steps     []*server.Step     `json:"steps"`
	Approvals []*server.Approval `json:"approvals"`
	// Waits are the run's wait_for conditions: what each awaits, its
	// deadline, and the event that matched.
	Waits   []*store.Wait      `json:"waits,omitempty"`
	Reorgs  []*server.Response `json:"reorg_responses,omitempty"`
	Repairs []store.Repair     `json:"repairs,omitempty"`
}

func runsShow(c *cli.Context) error {
	arg, err := runArg(c)
	if err != nil {
		return err
	}
	db, err := openExisting(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	id, err := resolveRun(c.Context, db.Pool, arg)
	if err != nil {
		return err
	}
	d, err := store.LoadRunDetail(c.Context, db.Pool, id)
	if err == nil {
		err = readLocalRun(c, db.Pool, d.Run)
	}
	if err != nil {
		return notFound(err)
	}
	run, steps, waits, reorgs := d.Run, d.Steps, d.Waits, server.NewResponses(d.Reorgs)
	if c.String("output") == "json" {
		_, err = printJSON(c, runDetail{server.NewRun(run), server.NewSteps(steps), server.NewApprovals(d.Approvals), waits, reorgs, d.Repairs})
		return err
	}
	if err := checkOutput(c); err != nil {
		return err
	}
	out := c.App.Writer
	fmt.Fprintf(out, "run       %s\nworkflow  %s (generation %d)\nstatus    %s\ntrigger   %s %s\ncreated   %s\n",
		run.ID, run.Workflow, run.Generation, run.Status, run.TriggerKind, run.TriggerKey, run.CreatedAt.UTC().Format(time.RFC3339))
	if run.Status == store.RunThrottled && run.WakeAt != nil {
		fmt.Fprintf(out, "waiting   throttle/rate_limit window, next try at %s\n", run.WakeAt.UTC().Format(time.RFC3339))
	}
	printRunNotes(out, run)
	if run.CancelReason != nil {
		fmt.Fprintf(out, "reason    %s\n", *run.CancelReason)
	}
	printRepairs(out, d.Repairs)
	if run.Error != nil {
		fmt.Fprintf(out, "error     %s\n", *run.Error)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	printSteps(c.Context, db.Pool, w, steps)
	if err := w.Flush(); err != nil {
		return err
	}
	printWaits(out, waits)
	if err := printApprovals(c.Context, out, db.Pool, run); err != nil {
		return err
	}
	return printResponses(c.Context, db.Pool, out, reorgs)
}

// printSteps prints journal rows, one a line, under the STEP header.
func printSteps(ctx context.Context, db store.DBTX, w *tabwriter.Writer, steps []*store.StepRun) {
	fmt.Fprintln(w, "STEP\tKIND\tSTATUS\tATTEMPT\tDURATION\tDETAIL")
	for _, s := range steps {
		dur := ""
		if s.StartedAt != nil && s.FinishedAt != nil {
			dur = s.FinishedAt.Sub(*s.StartedAt).Round(time.Millisecond).String()
		}
		detail := stepDetail(ctx, db, s)
		if s.HeldAt != nil && (s.Status == store.StepQueued || s.Status == store.StepRetrying || s.Status == store.StepWaiting) {
			detail = "held: its log was orphaned; waiting for the reorg's decision"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Key, s.Kind, s.Status, s.Attempt, dur, detail)
	}
}

func runsRetry(c *cli.Context) error {
	var resp *store.Response
	err := mutateRun(c, "retried", true, func(ctx context.Context, e *jobs.Engine, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
		// A run's failed on_reorg response is retried rather than the
		// run, which is returned as it is: say which was retried.
		run, r, err := e.RetryTx(ctx, tx, id)
		resp = r
		return run, err
	})
	if err == nil && resp != nil && c.String("output") != "json" {
		fmt.Fprintf(c.App.Writer, "its failed on_reorg response %s (fork at block %d) was retried from its failed step\n", resp.ID, resp.ForkBlock)
	}
	return err
}

// runsCancel is effect-idempotent: cancelling a cancelled run prints it as
// it is and exits 0.
func runsCancel(c *cli.Context) error {
	reason, err := store.CleanReason(c.String("reason"))
	if err != nil {
		return usagef("--reason: %v", err)
	}
	return mutateRun(c, "cancelled", false, func(ctx context.Context, _ *jobs.Engine, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
		run, err := jobs.CancelRun(ctx, tx, id)
		if err != nil || reason == "" {
			return run, err
		}
		return store.NoteCancelReason(ctx, tx, id, reason)
	})
}

// mutateRun runs fn on the run the argument names, in one transaction.
// withEngine builds the engine fn needs (from the project, without its
// secrets); otherwise only the database is opened.
func mutateRun(c *cli.Context, verb string, withEngine bool, fn func(context.Context, *jobs.Engine, pgx.Tx, uuid.UUID) (*store.Run, error)) error {
	arg, err := runArg(c)
	if err != nil {
		return err
	}
	var e *jobs.Engine
	var db *database
	if withEngine {
		e, db, err = openOperatorEngine(c)
	} else {
		db, err = openExisting(c, projectName(c), newLogger(c))
	}
	if err != nil {
		return err
	}
	defer db.Close()
	id, err := resolveRun(c.Context, db.Pool, arg)
	if err != nil {
		return err
	}
	var run *store.Run
	err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
		// Another project's run is not found: a project never retries
		// or cancels another's.
		if run, err = store.GetRun(c.Context, tx, id, false); err != nil {
			return err
		}
		if err := readLocalRun(c, tx, run); err != nil {
			return err
		}
		if run, err = fn(c.Context, e, tx, id); err != nil {
			return err
		}
		return readLocalRun(c, tx, run)
	})
	if err != nil {
		return notFound(err)
	}
	if done, err := printJSON(c, server.NewRun(run)); done || err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "run %s %s (status %s)\n", run.ID, verb, run.Status)
	if run.Status == store.RunCancelled && run.Error != nil {
		// What became of the transactions it was sending.
		fmt.Fprintln(c.App.Writer, *run.Error)
	}
	return nil
}

// openOperatorEngine opens the existing database and an engine that is not
// started, for operator commands (runs retry, workflows resume): enough to
// compile a run's stored generation and enqueue its work in a transaction,
// which the running `rflow start` then works. The project is loaded without
// its secrets (an unset ${VAR} is left out), because such an engine signs
// and calls nothing.
//
// Without the project file (another machine, a deleted checkout) the
// project is the one last deployed to the database (deployedProject).
func openOperatorEngine(c *cli.Context) (*jobs.Engine, *database, error) {
	var project *workflow.Project
	var db *database
	var err error
	if missing := projectFileMissing(c); missing != nil {
		if db, err = openExisting(c, projectName(c), newLogger(c)); err != nil {
			return nil, nil, err
		}
		if project, err = deployedProject(c, db, missing); err != nil {
			db.Close()
			return nil, nil, err
		}
	} else {
		if project, err = loadProjectWith(c, workflow.LoadOptions{AllowUnsetEnv: true}); err != nil {
			return nil, nil, err
		}
		if db, err = openExisting(c, project.Name, newLogger(c)); err != nil {
			return nil, nil, err
		}
	}
	ns, err := readNamespace(c.Context, db.Pool, project.Name)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	e, err := jobs.NewEngine(jobs.Config{Pool: db.Pool, Project: project, Namespace: ns})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return e, db, nil
}

// openEngine opens the database and an engine that is not started: enough
// to enqueue work in a transaction (the running `rflow start` works it).
func openEngine(c *cli.Context) (*jobs.Engine, *database, error) {
	project, err := loadProject(c)
	if err != nil {
		return nil, nil, err
	}
	logger := newLogger(c)
	db, err := openDatabase(c, project.Name, logger)
	if err != nil {
		return nil, nil, err
	}
	e, err := migratedEngine(c.Context, engineOptions{db: db, project: project, logger: logger}, nil)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return e, db, nil
}

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return cli.Exit(err.Error(), exitFailure)
	}
	return err
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max-1] + "…"
	}
	return s
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "start a run of a workflow by hand (manual trigger, or an event trigger with --event)",
		ArgsUsage: "<workflow>",
		Description: "Like start, run migrates the database and deploys the project's workflows first, so it works\n" +
			"on a fresh database; a running `rflow start` (or a later one) works the run.",
		Flags: []cli.Flag{
			configFlag(), outputFlag(),
			&cli.StringFlag{Name: "input", Usage: "JSON exposed as trigger.input"},
			&cli.StringFlag{Name: "event", Usage: "fire an event workflow with this synthetic occurrence: JSON of the event's args (and optionally block, tx_hash, log_index, tx_log_index, address)"},
			&cli.StringFlag{Name: "key", Usage: "trigger key (idempotency: the same key never runs twice); default a fresh uuid"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("run takes exactly one workflow name")
			}
			name := c.Args().First()
			var input json.RawMessage
			if in := c.String("input"); in != "" {
				if !json.Valid([]byte(in)) {
					var v any
					return usagef("--input is not valid JSON: %v", json.Unmarshal([]byte(in), &v))
				}
				if err := workflow.CheckJSON([]byte(in)); err != nil {
					return usagef("--input cannot be stored: %v", err)
				}
				input = json.RawMessage(in)
			}
			key := c.String("key")
			if key == "" {
				key = "manual:" + uuid.NewString()
			}
			logger := newLogger(c)
			project, err := loadProject(c)
			if err != nil {
				return err
			}
			w, err := projectWorkflow(project, name, c.String("config"))
			if err != nil {
				return err
			}
			if err := checkRunTrigger(w, c.IsSet("event"), c.IsSet("input")); err != nil {
				return err
			}
			claim := store.ManualClaim(name, key, input) // the local name: qualified below
			if w.Trigger.Kind == trigger.Event {
				if claim, err = syntheticEventClaim(project, w, c.String("event"), key); err != nil {
					return err
				}
			}
			db, err := openDatabase(c, project.Name, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			// No backends: this engine only enqueues; `rflow start` works the run.
			e, err := deployProject(c.Context, engineOptions{db: db, project: project, logger: logger, configPath: c.String("config")}, nil)
			if err != nil {
				return err
			}
			claim.Workflow = e.Namespace().Qualify(claim.Workflow)
			var id uuid.UUID
			var created bool
			err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
				id, created, err = e.StartRunTx(c.Context, tx, claim)
				return err
			})
			var conflict *store.TriggerKeyConflict
			var pruned *store.PrunedError
			if errors.As(err, &pruned) {
				if done, err := printJSON(c, map[string]any{"run_id": pruned.RunID, "created": false, "key": key, "pruned": true}); done || err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, pruned.Error())
				return nil
			}
			if errors.As(err, &conflict) {
				return cli.Exit(fmt.Sprintf("%v (`rflow runs show %s`)", conflict, conflict.RunID), exitFailure)
			}
			if err != nil {
				return err
			}
			if done, err := printJSON(c, map[string]any{"run_id": id, "created": created, "key": key}); done || err != nil {
				return err
			}
			if created {
				fmt.Fprintf(c.App.Writer, "run %s queued (key %s)\n", id, key)
				if !c.IsSet("key") {
					// The key is the call's idempotency: a retry of an
					// invocation whose answer was lost must reuse it.
					fmt.Fprintf(c.App.Writer, "to repeat this call without starting a second run: rflow run %s --key %s\n", name, key)
				}
			} else {
				fmt.Fprintf(c.App.Writer, "key %s already has run %s: nothing new started\n", key, id)
			}
			return nil
		},
	}
}

func joinStatuses(ss []store.RunStatus) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// readLocalRun shows run, read by id, as one of this project's
// (store.Namespace.LocalRun): another project's run is not found.
func readLocalRun(c *cli.Context, db store.DBTX, run *store.Run) error {
	ns, err := readNamespace(c.Context, db, fileProjectName(c))
	if err != nil {
		return err
	}
	return ns.LocalRun(run)
}
