package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
)

func approvalsCommand() *cli.Command {
	return &cli.Command{
		Name:  "approvals",
		Usage: "list the approval gates of sends (decide them with rflow approve / rflow reject)",
		Subcommands: []*cli.Command{{
			Name:    "list",
			Aliases: []string{"ls"},
			Usage:   "list approvals, newest first",
			Flags: []cli.Flag{
				configFlag(), outputFlag(),
				&cli.StringFlag{Name: "status", Usage: "only approvals in this status (" + joinApprovalStatuses() + ")"},
				&cli.StringFlag{Name: "workflow", Usage: "only this workflow"},
				&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many approvals"},
				&cli.BoolFlag{Name: "rehearsals", Usage: "include the gates of replays and tests (hidden unless --workflow names one)"},
			},
			Action: approvalsList,
		}},
	}
}

func decisionFlags() []cli.Flag {
	return []cli.Flag{configFlag(), outputFlag(),
		&cli.StringFlag{Name: "reason", Usage: "why (recorded with the decision, shown by runs show)"},
		&cli.StringFlag{Name: "by", Usage: "who decides (default: cli:<your user name>)"},
	}
}

func approveCommand() *cli.Command {
	return &cli.Command{
		Name: "approve", Usage: "approve a pending approval: its send is rechecked, re-simulated and broadcast once",
		ArgsUsage: "<approval-id>", Flags: decisionFlags(),
		Action: func(c *cli.Context) error { return decide(c, true) },
	}
}

func rejectCommand() *cli.Command {
	return &cli.Command{
		Name: "reject", Usage: "reject a pending approval: its step fails and nothing is sent",
		ArgsUsage: "<approval-id>", Flags: decisionFlags(),
		Action: func(c *cli.Context) error { return decide(c, false) },
	}
}

func joinApprovalStatuses() string {
	var out []string
	for _, s := range store.ApprovalStatuses() {
		out = append(out, string(s))
	}
	return strings.Join(out, ", ")
}

// approvalList is approvals list's -o json.
type approvalList struct {
	Approvals []*server.Approval `json:"approvals"`
}

func approvalsList(c *cli.Context) error {
	if err := noArgs(c, "filter with --workflow W or --status S"); err != nil {
		return err
	}
	f := store.ApprovalFilter{Status: store.ApprovalStatus(c.String("status")), Workflow: c.String("workflow"), Limit: c.Int("limit"),
		Rehearsals: c.Bool("rehearsals")}
	if f.Status != "" && !f.Status.Valid() {
		return usagef("--status %q is not an approval status; use one of %s", f.Status, joinApprovalStatuses())
	}
	if f.Limit < 1 {
		return usagef("--limit must be at least 1")
	}
	if err := checkOutput(c); err != nil {
		return err
	}
	db, err := openExisting(c, projectName(c), newLogger(c))
	if err != nil {
		return err
	}
	defer db.Close()
	aps, err := store.ListApprovals(c.Context, db.Pool, f)
	if err != nil {
		return err
	}
	if done, err := printJSON(c, approvalList{Approvals: server.NewApprovals(aps)}); done || err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tRUN\tWORKFLOW\tSTEP\tSTATUS\tEXPIRES\tSUMMARY")
	for _, a := range aps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", store.ShortID(a.ID), store.ShortID(a.RunID), a.Workflow, a.StepKey,
			a.Status, a.ExpiresAt.UTC().Format(time.RFC3339), oneLine(summaryLine(a), 140))
	}
	return w.Flush()
}

func summaryLine(a *store.Approval) string {
	sum, err := jobs.DecodeApprovalSummary(a.Summary)
	if err != nil {
		return err.Error()
	}
	return sum.OneLine()
}

// decide approves or rejects one approval. The same decision again exits 0
// and prints the approval as it is (nothing is sent twice); a conflicting
// one, or a decision after the expiry, exits 1 saying why.
func decide(c *cli.Context, approve bool) error {
	if c.NArg() != 1 {
		return usagef("%s takes exactly one approval id", commandPath(c))
	}
	arg := c.Args().First()
	if _, err := uuid.Parse(arg); err != nil && !isShortID(arg) {
		return usagef("%q is not an approval id (a UUID, or its short id: its last %d characters, as `rflow approvals` prints it)", arg, store.ShortIDLen)
	}
	if err := checkOutput(c); err != nil {
		return err
	}
	by := c.String("by")
	if by == "" {
		by = "cli:" + userName()
	}
	e, db, err := openOperatorEngine(c)
	if err != nil {
		return err
	}
	defer db.Close()
	var ap *store.Approval
	err = pgx.BeginFunc(c.Context, db.Pool, func(tx pgx.Tx) error {
		found, err := store.ApprovalByRef(c.Context, tx, arg)
		if err != nil {
			return err
		}
		ap, err = e.DecideApprovalTx(c.Context, tx, found.ID, store.ApprovalDecision{Approve: approve, By: by, Reason: c.String("reason")})
		return err
	})
	var conflict *store.ApprovalConflictError
	var amb *store.AmbiguousShortIDError
	switch {
	case errors.As(err, &conflict):
		return cli.Exit(conflict.Msg, exitFailure)
	case errors.As(err, &amb):
		var b strings.Builder
		b.WriteString(amb.Error() + ":")
		for _, a := range amb.Matches {
			fmt.Fprintf(&b, "\n  %s  %s  %s  %s", a.ID, a.Workflow, a.StepKey, a.Status)
		}
		return cli.Exit(b.String(), exitFailure)
	case err != nil:
		return notFound(err)
	}
	if done, err := printJSON(c, server.NewApproval(ap)); done || err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "approval %s %s by %s (run %s, step %s)\n", ap.ID, ap.Status, deref(ap.DecidedBy), ap.RunID, ap.StepKey)
	return nil
}

func userName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// printApprovals is the approvals section of runs show: each gate, its
// status and who decided it, when and why.
func printApprovals(ctx context.Context, w io.Writer, q store.DBTX, run *store.Run) error {
	aps, err := store.ListApprovals(ctx, q, store.ApprovalFilter{RunID: run.ID})
	if err != nil || len(aps) == 0 {
		return err
	}
	fmt.Fprintln(w)
	for _, a := range aps {
		fmt.Fprintf(w, "approval  %s  step %s (attempt %d)  %s\n", a.ID, a.StepKey, a.Attempt, a.Status)
		fmt.Fprintf(w, "          %s\n", summaryLine(a))
		if a.Status == store.ApprovalPending {
			fmt.Fprintf(w, "          expires %s (on_timeout: %s); decide: rflow approve %s | rflow reject %s --reason R\n",
				a.ExpiresAt.UTC().Format(time.RFC3339), a.OnTimeout, store.ShortID(a.ID), store.ShortID(a.ID))
			continue
		}
		line := "          " + string(a.Status)
		if a.DecidedBy != nil {
			line += " by " + *a.DecidedBy
		}
		if a.DecidedAt != nil {
			line += " at " + a.DecidedAt.UTC().Format(time.RFC3339)
		}
		if a.Reason != nil {
			line += ": " + *a.Reason
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
