package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

func runsPruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "delete finished runs and their journal, in bounded batches",
		Description: "Deletes completed and cancelled runs that finished before --older-than ago, with their\n" +
			"step journal and leftover River jobs. Failed runs (the dead letter queue) only with\n" +
			"--status failed; unfinished runs never. Each pruned run leaves a tombstone of its trigger key,\n" +
			"so an occurrence delivered again claims no new run. --older-than under the longest webhook ttl\n" +
			"(a day by default) needs --force: a webhook redelivered within its ttl would answer with a run\n" +
			"that no longer exists.",
		Flags: []cli.Flag{
			configFlag(), outputFlag(),
			&cli.StringFlag{Name: "older-than", Usage: "prune runs that finished longer ago than this, e.g. 30d, 12h"},
			&cli.StringSliceFlag{Name: "status", Usage: "completed, cancelled or failed; repeat for several (default: completed and cancelled)"},
			&cli.StringFlag{Name: "workflow", Usage: "only this workflow"},
			&cli.IntFlag{Name: "batch", Value: store.DefaultPruneBatch, Usage: "runs deleted per transaction"},
			&cli.BoolFlag{Name: "dry-run", Usage: "count what would be pruned; delete nothing"},
			&cli.BoolFlag{Name: "force", Usage: "prune runs younger than the longest webhook ttl"},
		},
		Action: runsPrune,
	}
}

// pruneResult is what `rflow runs prune -o json` prints.
type pruneResult struct {
	Runs           int64             `json:"runs"`
	DryRun         bool              `json:"dry_run"`
	FinishedBefore time.Time         `json:"finished_before"`
	Statuses       []store.RunStatus `json:"statuses"`
	Workflow       string            `json:"workflow,omitempty"`
}

func runsPrune(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("%s takes no arguments", commandPath(c))
	}
	if c.String("older-than") == "" {
		return usagef("--older-than is required, e.g. --older-than 30d")
	}
	age, err := workflow.ParseRetention(c.String("older-than"))
	if err != nil {
		return usagef("--older-than: %v", err)
	}
	var statuses []store.RunStatus
	for _, s := range c.StringSlice("status") {
		statuses = append(statuses, store.RunStatus(s))
	}
	if len(statuses) == 0 {
		statuses = []store.RunStatus{store.RunCompleted, store.RunCancelled}
	}
	for _, s := range statuses {
		if !s.Terminal() {
			return usagef("--status %q: only finished runs can be pruned (completed, cancelled or failed)", s)
		}
	}
	if c.Int("batch") < 1 {
		return usagef("--batch must be at least 1")
	}
	if window := redeliveryWindow(c); age < window && !c.Bool("force") {
		return usagef("--older-than %s is under the longest re-delivery window, %s (the largest webhook ttl of %s): "+
			"a webhook redelivered within it would answer with a pruned run; prune older runs, or pass --force",
			c.String("older-than"), window, c.String("config"))
	}
	slices.Sort(statuses)
	f := store.PruneFilter{FinishedBefore: time.Now().Add(-age), Statuses: slices.Compact(statuses),
		Workflow: c.String("workflow"), Batch: c.Int("batch")}
	db, err := openDatabase(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	if f.Namespace, err = readNamespace(c.Context, db.Pool, fileProjectName(c)); err != nil {
		return err
	}
	res := pruneResult{DryRun: c.Bool("dry-run"), FinishedBefore: f.FinishedBefore.UTC(), Statuses: f.Statuses, Workflow: f.Workflow}
	if res.DryRun {
		res.Runs, err = store.CountPrunable(c.Context, db.Pool, f)
	} else {
		res.Runs, err = store.PruneRuns(c.Context, db.Pool, f)
	}
	if err != nil {
		return err
	}
	if done, err := printJSON(c, res); done || err != nil {
		return err
	}
	verb := "pruned"
	if res.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(c.App.Writer, "%s %d run(s) (%v) that finished before %s\n", verb, res.Runs, res.Statuses,
		res.FinishedBefore.Format(time.RFC3339))
	return nil
}

// redeliveryWindow is the longest time an occurrence may be delivered
// again and answered from its run: the largest webhook ttl of the project
// file (workflow.DefaultWebhookTTL when it has none or cannot be read).
func redeliveryWindow(c *cli.Context) time.Duration {
	window := workflow.DefaultWebhookTTL
	p, err := loadProjectFile(c, workflow.LoadOptions{})
	if err != nil {
		return window
	}
	for _, wf := range p.Workflows {
		if h := wf.Trigger.Webhook; h != nil && h.TTL > window {
			window = h.TTL
		}
	}
	return window
}
