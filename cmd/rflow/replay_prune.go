package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
)

func replayPruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "delete rehearsal sessions: their runs, steps, jobs and reservations (never a live workflow's row)",
		Description: "Deletes the rows of one replay session (--session S) or of every rehearsal (--all: every\n" +
			"replay and what killed `rflow test` sessions left, with their River schemas), in bounded\n" +
			"batches: every statement is keyed by a replay_<session>__<workflow> or test_<uuid>__<workflow>\n" +
			"name, its queue or a rehearsal_<hex> schema, so it cannot reach a live workflow. Runs a\n" +
			"replay is still working, and anything of tests while an `rflow test` runs, are left for\n" +
			"the next prune.",
		Flags: []cli.Flag{
			configFlag(), outputFlag(),
			&cli.StringFlag{Name: "session", Usage: "the session to delete (printed by rflow replay)"},
			&cli.BoolFlag{Name: "all", Usage: "delete every replay session and the leftovers of killed rflow test sessions"},
			&cli.IntFlag{Name: "batch", Value: store.DefaultPruneBatch, Usage: "rows deleted per transaction"},
		},
		Action: replayPrune,
	}
}

// replayPruneResult is what `rflow replay prune -o json` prints.
type replayPruneResult struct {
	Session string `json:"session,omitempty"`
	All     bool   `json:"all,omitempty"`
	store.RehearsalPruned
}

func replayPrune(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("replay prune takes no arguments (did you mean --session %s?)", c.Args().First())
	}
	if err := checkOutput(c); err != nil {
		return err
	}
	session, all := c.String("session"), c.Bool("all")
	switch {
	case session == "" && !all:
		return usagef("say which sessions: --session S (printed by rflow replay) or --all")
	case session != "" && all:
		return usagef("--session and --all exclude each other")
	case c.Int("batch") < 1:
		return usagef("--batch must be at least 1")
	}
	if session != "" {
		if err := store.ValidSession(session); err != nil {
			return usagef("--session: %v", err)
		}
	}
	db, err := openExisting(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	res := replayPruneResult{Session: session, All: all}
	f := store.RehearsalPruneFilter{Session: session, Batch: c.Int("batch")} // --all: every kind
	if f.Namespace, err = readNamespace(c.Context, db.Pool, fileProjectName(c)); err != nil {
		return err
	}
	if session != "" {
		f.Kind = store.RehearsalReplay
	}
	res.RehearsalPruned, err = store.PruneRehearsals(c.Context, db.Pool, f)
	if err != nil {
		return err
	}
	if ok, err := printJSON(c, res); ok || err != nil {
		return err
	}
	what := "every rehearsal (replays, killed tests)"
	if session != "" {
		what = "replay session " + session
	}
	fmt.Fprintf(c.App.Writer, "pruned %s: %d run(s), %d job(s), %d simulated send(s), %d workflow(s), %d River schema(s)\n",
		what, res.Runs, res.Jobs, res.Sends, res.Workflows, res.Schemas)
	if res.Busy > 0 {
		fmt.Fprintf(c.App.Writer, "%d run(s) are still being worked by a replay or an rflow test; prune again once it has ended\n", res.Busy)
	}
	return nil
}
