package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
)

func workflowsCommand() *cli.Command {
	return &cli.Command{
		Name:  "workflows",
		Usage: "list, deploy, pause and resume workflows",
		Subcommands: []*cli.Command{
			deployCommand(),
			{
				Name: "ls", Aliases: []string{"list"}, Usage: "list deployed workflows", Flags: []cli.Flag{configFlag(), outputFlag()},
				Action: func(c *cli.Context) error {
					if err := noArgs(c, "it lists every deployed workflow"); err != nil {
						return err
					}
					db, err := openExisting(c, projectName(c), newLogger(c))
					if err != nil {
						return err
					}
					defer db.Close()
					ns, err := readNamespace(c.Context, db.Pool, fileProjectName(c))
					if err != nil {
						return err
					}
					wfs, err := store.ListWorkflows(c.Context, db.Pool, ns)
					if err != nil {
						return err
					}
					if wfs == nil {
						wfs = []store.WorkflowRow{}
					}
					if done, err := printJSON(c, wfs); done || err != nil {
						return err
					}
					w := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
					fmt.Fprintln(w, "NAME\tGENERATION\tSTATE\tPAUSED\tSINCE\tREASON\tUPDATED")
					for _, wf := range wfs {
						state, since, reason := "active", "-", "-"
						if wf.PausedAt != nil {
							since = wf.PausedAt.UTC().Format(time.RFC3339)
						}
						if wf.PausedReason != "" {
							reason = wf.PausedReason
						}
						if wf.RetiredAt != nil {
							state, since, reason = "retired", wf.RetiredAt.UTC().Format(time.RFC3339), "not in the project file"
						}
						fmt.Fprintf(w, "%s\t%d\t%s\t%v\t%s\t%s\t%s\n", wf.Name, wf.Generation, state, wf.Paused, since, reason,
							wf.UpdatedAt.UTC().Format(time.RFC3339))
					}
					return w.Flush()
				},
			},
			{
				Name: "pause", Usage: "stop starting runs (claims still pass the gate and wait)", ArgsUsage: "<workflow>",
				Flags: []cli.Flag{configFlag(), &cli.StringFlag{Name: "reason",
					Usage: "why: shown by workflows ls (paused_reason in -o json); a paused workflow keeps its first reason"}},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("%s takes exactly one workflow name", commandPath(c))
					}
					reason, err := store.CleanReason(c.String("reason"))
					if err != nil {
						return usagef("--reason: %v", err)
					}
					db, err := openExisting(c, projectName(c), newLogger(c))
					if err != nil {
						return err
					}
					defer db.Close()
					ns, err := readNamespace(c.Context, db.Pool, fileProjectName(c))
					if err != nil {
						return err
					}
					if err := store.PauseWorkflow(c.Context, db.Pool, ns.Qualify(c.Args().First()), reason); err != nil {
						return notFound(err)
					}
					fmt.Fprintf(c.App.Writer, "workflow %s paused\n", c.Args().First())
					return nil
				},
			},
			{
				Name: "resume", Usage: "start runs again, including those claimed while paused", ArgsUsage: "<workflow>",
				Flags: []cli.Flag{configFlag()},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("%s takes exactly one workflow name", commandPath(c))
					}
					e, db, err := openOperatorEngine(c)
					if err != nil {
						return err
					}
					defer db.Close()
					var n int
					err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
						n, err = e.ResumeWorkflowTx(c.Context, tx, e.Namespace().Qualify(c.Args().First()))
						return err
					})
					if err != nil {
						return notFound(err)
					}
					fmt.Fprintf(c.App.Writer, "workflow %s resumed (%d waiting run(s) started)\n", c.Args().First(), n)
					return nil
				},
			},
		},
	}
}

// deployCommand deploys the project file's workflows on purpose. Unlike the
// start-up sync it also deploys a spec equal to an older generation, as a
// new generation: that is how a rollback is done.
func deployCommand() *cli.Command {
	return &cli.Command{
		Name:  "deploy",
		Usage: "deploy the project file's workflows now, even an older definition (a rollback)",
		Description: "rflow start deploys only new definitions and skips one equal to a superseded generation,\n" +
			"so an old process cannot roll a workflow back; this command is the deliberate way to do it.\n" +
			"Running processes pick the new generation up within seconds.",
		Flags: []cli.Flag{configFlag(), outputFlag(),
			&cli.StringSliceFlag{Name: "workflow", Aliases: []string{"w"}, Usage: "deploy only this workflow (repeatable); retires nothing"},
			&cli.BoolFlag{Name: "keep-missing", Usage: "keep deployed the workflows a project file deployed that this file no longer has (default: retire them)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usagef("deploy takes no arguments; name workflows with --workflow")
			}
			e, db, err := openEngine(c)
			if err != nil {
				return err
			}
			defer db.Close()
			var out []store.Deployed
			err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
				out, err = e.DeployWorkflows(c.Context, tx, c.StringSlice("workflow"))
				if err != nil || len(c.StringSlice("workflow")) > 0 || c.Bool("keep-missing") {
					return err
				}
				// The whole file deployed: what it no longer has is retired.
				retired, err := e.RetireMissing(c.Context, tx)
				out = append(out, retired...)
				if err != nil {
					return err
				}
				return saveSources(c.Context, tx, e.Project())
			})
			if err != nil {
				return notFound(err)
			}
			if done, err := printJSON(c, out); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tGENERATION\tCHANGE")
			for _, d := range out {
				fmt.Fprintf(w, "%s\t%d\t%s\n", d.Name, d.Generation, describeDeploy(d))
			}
			return w.Flush()
		},
	}
}

// describeDeploy says in words what a deploy did to one workflow.
func describeDeploy(d store.Deployed) string {
	switch {
	case d.Retired:
		return "retired: not in the project file (its triggers stop, runs in flight finish; --keep-missing keeps it)"
	case !d.Changed:
		return "unchanged"
	case d.Previous == 0:
		return "new workflow"
	case d.SameAs != 0:
		return fmt.Sprintf("replaces generation %d; same definition as generation %d (rollback)", d.Previous, d.SameAs)
	default:
		return fmt.Sprintf("replaces generation %d", d.Previous)
	}
}
