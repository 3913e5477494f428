package main

import (
	"fmt"
	"math/big"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/budgets"
)

// budgetRow is one line of `rflow budgets ls`. Amounts are decimal strings
// in the asset's base unit (wei for native): exact, whatever their size.
type budgetRow struct {
	Workflow  string `json:"workflow"`
	Name      string `json:"name"`
	Asset     string `json:"asset"`
	Cap       string `json:"cap"`
	CapText   string `json:"cap_text"`
	Window    string `json:"window"`
	Reserved  string `json:"reserved"`
	Spent     string `json:"spent"`
	Remaining string `json:"remaining"`
}

func budgetsCommand() *cli.Command {
	return &cli.Command{
		Name:  "budgets",
		Usage: "show spend budgets",
		Subcommands: []*cli.Command{{
			Name: "ls", Aliases: []string{"list"}, Usage: "list budgets with what is reserved, spent and left in their window",
			Flags: []cli.Flag{configFlag(), outputFlag()},
			Action: func(c *cli.Context) error {
				if err := noArgs(c, "it lists every budget"); err != nil {
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
				uses, err := budgets.List(c.Context, db.Pool, ns)
				if err != nil {
					return err
				}
				rows := make([]budgetRow, 0, len(uses))
				for _, u := range uses {
					left := new(big.Int).Sub(u.Cap, u.Reserved)
					if left.Sub(left, u.Spent).Sign() < 0 {
						left.SetInt64(0)
					}
					rows = append(rows, budgetRow{Workflow: u.Workflow, Name: u.Name, Asset: u.Asset, Cap: u.Cap.String(),
						CapText: u.CapText, Window: u.Window.String(), Reserved: u.Reserved.String(), Spent: u.Spent.String(),
						Remaining: left.String()})
				}
				if done, err := printJSON(c, rows); done || err != nil {
					return err
				}
				w := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "WORKFLOW\tNAME\tASSET\tCAP\tWINDOW\tRESERVED\tSPENT\tREMAINING")
				for _, r := range rows {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Workflow, r.Name, r.Asset, r.CapText, r.Window, r.Reserved, r.Spent, r.Remaining)
				}
				return w.Flush()
			},
		}},
	}
}
