package main

import (
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
	"github.com/rflow-dev/rflow/store"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "inspect, retry and cancel runs",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list runs, newest first",
				Flags: []cli.Flag{
					configFlag(), outputFlag(),
					&cli.StringFlag{Name: "workflow", Usage: "only this workflow"},
					&cli.StringFlag{Name: "status", Usage: "only runs in this status"},
					&cli.BoolFlag{Name: "failed", Usage: "only failed runs (the dead letter queue)"},
					&cli.IntFlag{Name: "limit", Value: 50},
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
				Flags: []cli.Flag{configFlag(), outputFlag()}, Action: runsCancel,
			},
		},
	}
}

func runID(c *cli.Context) (uuid.UUID, error) {
	if c.NArg() != 1 {
		return uuid.Nil, usagef("%s takes exactly one run id", c.Command.FullName())
	}
	id, err := uuid.Parse(c.Args().First())
	if err != nil {
		return uuid.Nil, usagef("%q is not a run id (a UUID)", c.Args().First())
	}
	return id, nil
}

func runsList(c *cli.Context) error {
	status := c.String("status")
	if c.Bool("failed") {
		status = store.RunFailed
	}
	db, err := openDatabase(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	runs, err := store.ListRuns(c.Context, db.Pool, store.RunFilter{Workflow: c.String("workflow"), Status: status, Limit: c.Int("limit")})
	if err != nil {
		return err
	}
	if runs == nil {
		runs = []*store.Run{}
	}
	if done, err := printJSON(c, runs); done || err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tWORKFLOW\tSTATUS\tTRIGGER\tCREATED\tERROR")
	for _, r := range runs {
		errText := ""
		if r.Error != nil {
			errText = oneLine(*r.Error, 60)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Status, oneLine(r.TriggerKey, 40),
			r.CreatedAt.UTC().Format(time.RFC3339), errText)
	}
	return w.Flush()
}

type runDetail struct {
	*store.Run
	Steps []*store.StepRun `json:"steps"`
}

func runsShow(c *cli.Context) error {
	id, err := runID(c)
	if err != nil {
		return err
	}
	db, err := openDatabase(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	run, err := store.GetRun(c.Context, db.Pool, id, false)
	if err != nil {
		return notFound(err)
	}
	steps, err := store.RunSteps(c.Context, db.Pool, id)
	if err != nil {
		return err
	}
	if steps == nil {
		steps = []*store.StepRun{}
	}
	if done, err := printJSON(c, runDetail{run, steps}); done || err != nil {
		return err
	}
	out := c.App.Writer
	fmt.Fprintf(out, "run       %s\nworkflow  %s (generation %d)\nstatus    %s\ntrigger   %s %s\ncreated   %s\n",
		run.ID, run.Workflow, run.Generation, run.Status, run.TriggerKind, run.TriggerKey, run.CreatedAt.UTC().Format(time.RFC3339))
	if run.Error != nil {
		fmt.Fprintf(out, "error     %s\n", *run.Error)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "STEP\tKIND\tSTATUS\tATTEMPT\tDURATION\tDETAIL")
	for _, s := range steps {
		dur := ""
		if s.StartedAt != nil && s.FinishedAt != nil {
			dur = s.FinishedAt.Sub(*s.StartedAt).Round(time.Millisecond).String()
		}
		detail := ""
		if s.Error != nil {
			detail = oneLine(*s.Error, 70)
		} else if len(s.Output) > 0 {
			detail = oneLine(string(s.Output), 70)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Key, s.Kind, s.Status, s.Attempt, dur, detail)
	}
	return w.Flush()
}

func runsRetry(c *cli.Context) error {
	return mutateRun(c, "retried", func(ctx context.Context, e *jobs.Engine, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
		return e.RetryRunTx(ctx, tx, id)
	})
}

// runsCancel is effect-idempotent: cancelling a cancelled run prints it as
// it is and exits 0.
func runsCancel(c *cli.Context) error {
	return mutateRun(c, "cancelled", func(ctx context.Context, e *jobs.Engine, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
		return e.CancelRunTx(ctx, tx, id)
	})
}

func mutateRun(c *cli.Context, verb string, fn func(context.Context, *jobs.Engine, pgx.Tx, uuid.UUID) (*store.Run, error)) error {
	id, err := runID(c)
	if err != nil {
		return err
	}
	e, db, err := openEngine(c)
	if err != nil {
		return err
	}
	defer db.Close()
	var run *store.Run
	err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
		run, err = fn(c.Context, e, tx, id)
		return err
	})
	if err != nil {
		return notFound(err)
	}
	if done, err := printJSON(c, run); done || err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "run %s %s (status %s)\n", run.ID, verb, run.Status)
	if run.Status == store.RunCancelled && run.Error != nil {
		// What became of the transactions it was sending.
		fmt.Fprintln(c.App.Writer, *run.Error)
	}
	return nil
}

// openEngine opens the database and an engine that is not started: enough
// to enqueue work in a transaction (the running `rflow start` works it).
func openEngine(c *cli.Context) (*jobs.Engine, *database, error) {
	project, err := loadProject(c)
	if err != nil {
		return nil, nil, err
	}
	db, err := openDatabase(c, project.Name, newLogger(c))
	if err != nil {
		return nil, nil, err
	}
	if _, err := store.Migrate(c.Context, db.Pool, nil); err != nil {
		db.Close()
		return nil, nil, err
	}
	e, err := jobs.NewEngine(jobs.Config{Pool: db.Pool, Project: project})
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
		Usage:     "start a run of a workflow by hand (manual trigger)",
		ArgsUsage: "<workflow>",
		Flags: []cli.Flag{
			configFlag(), outputFlag(),
			&cli.StringFlag{Name: "input", Usage: "JSON exposed as trigger.input"},
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
				input = json.RawMessage(in)
			}
			key := c.String("key")
			if key == "" {
				key = "manual:" + uuid.NewString()
			}
			e, db, err := openEngine(c)
			if err != nil {
				return err
			}
			defer db.Close()
			if _, err := store.GetWorkflow(c.Context, db.Pool, name); err != nil {
				return cli.Exit(fmt.Sprintf("workflow %s is not deployed (run `rflow start` once to sync %s)", name, c.String("config")), exitFailure)
			}
			var id uuid.UUID
			var created bool
			err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
				id, created, err = e.StartRunTx(c.Context, tx, store.ManualClaim(name, key, input))
				return err
			})
			var conflict *store.TriggerKeyConflict
			if errors.As(err, &conflict) {
				return cli.Exit(fmt.Sprintf("rflow run: %v (`rflow runs show %s`)", conflict, conflict.RunID), exitFailure)
			}
			if err != nil {
				return err
			}
			if done, err := printJSON(c, map[string]any{"run_id": id, "created": created, "key": key}); done || err != nil {
				return err
			}
			if created {
				fmt.Fprintf(c.App.Writer, "run %s queued (key %s)\n", id, key)
			} else {
				fmt.Fprintf(c.App.Writer, "key %s already has run %s: nothing new started\n", key, id)
			}
			return nil
		},
	}
}
