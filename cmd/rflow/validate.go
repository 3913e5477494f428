package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/workflow"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "check the project file and every workflow (exit 1 on errors)",
		Flags: []cli.Flag{
			configFlag(),
			&cli.BoolFlag{Name: "strict", Usage: "treat warnings as errors"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("validate takes no arguments (use -c to pick the project file)")
			}
			if err := projectFileMissing(c); err != nil {
				return err
			}
			path := c.String("config")
			p, err := workflow.Load(path, workflow.LoadOptions{Strict: c.Bool("strict")})
			var ds workflow.Diagnostics
			switch {
			case errors.As(err, &ds):
				for _, d := range ds {
					fmt.Fprintln(c.App.ErrWriter, d)
				}
				return cli.Exit(fmt.Sprintf("%s: %s, %s", path, countOf(len(ds.Errors()), "error"), countOf(len(ds.Warnings()), "warning")), exitFailure)
			case err != nil:
				return err
			}
			for _, d := range p.Warnings {
				fmt.Fprintln(c.App.ErrWriter, d)
			}
			fmt.Fprintf(c.App.Writer, "%s: valid: %s", path, p.Summary())
			if n := len(p.Warnings); n > 0 {
				fmt.Fprintf(c.App.Writer, "; %s", countOf(n, "warning"))
			}
			fmt.Fprintln(c.App.Writer)
			return nil
		},
	}
}

func countOf(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
