package main

import (
	"fmt"
	"io"
	"math/big"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/units"
)

// budgetRow is one line of `rflow budgets ls`. Amounts are decimal strings
// in the asset's base unit (wei for native): exact, whatever their size;
// Unit says how a person reads them (absent when the token's decimals are
// not declared).
type budgetRow struct {
	Workflow                   string      `json:"workflow"`
	Name                       string      `json:"name"`
	Asset                      string      `json:"asset"`
	Cap                        string      `json:"cap"`
	CapText                    string      `json:"cap_text"`
	Window                     string      `json:"window"`
	Reserved                   string      `json:"reserved"`
	Spent                      string      `json:"spent"`
	Remaining                  string      `json:"remaining"`
	Unit                       *units.Unit `json:"unit,omitempty"`
	unit                       units.Unit
	cap, reserved, spent, left *big.Int
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
				uses, err := budgets.List(c.Context, db.Pool)
				if err != nil {
					return err
				}
				rows := make([]budgetRow, 0, len(uses))
				for _, u := range uses {
					left := new(big.Int).Sub(u.Cap, u.Reserved)
					if left.Sub(left, u.Spent).Sign() < 0 {
						left.SetInt64(0)
					}
					r := budgetRow{Workflow: u.Workflow, Name: u.Name, Asset: u.Asset, Cap: u.Cap.String(),
						CapText: u.CapText, Window: u.Window.String(), Reserved: u.Reserved.String(), Spent: u.Spent.String(),
						Remaining: left.String(), unit: budgets.Unit(u.Asset, u.Unit),
						cap: u.Cap, reserved: u.Reserved, spent: u.Spent, left: left}
					if r.unit.Known() {
						r.Unit = &r.unit
					}
					rows = append(rows, r)
				}
				if done, err := printJSON(c, rows); done || err != nil {
					return err
				}
				return printBudgets(c.App.Writer, rows)
			},
		}},
	}
}

// printBudgets is the budgets table: cap, reserved, spent and remaining of
// a row in its one unit, each column aligned on the decimal point.
func printBudgets(out io.Writer, rows []budgetRow) error {
	cols := make([][]string, 4)
	for _, r := range rows {
		for i, v := range []*big.Int{r.cap, r.reserved, r.spent, r.left} {
			cols[i] = append(cols[i], r.unit.Format(v))
		}
	}
	for i := range cols {
		cols[i] = units.Column(cols[i])
	}
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "WORKFLOW\tNAME\tASSET\tWINDOW\tCAP\tRESERVED\tSPENT\tREMAINING")
	for i, r := range rows {
		asset := r.Asset
		if r.unit.Known() && r.unit.Symbol != r.Asset {
			asset += " (" + r.unit.Symbol + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Workflow, r.Name, asset, r.Window, cols[0][i], cols[1][i], cols[2][i], cols[3][i])
	}
	return w.Flush()
}
