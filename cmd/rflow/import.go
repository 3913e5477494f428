package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/ozimport"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "convert another tool's configuration into an rflow project",
		Subcommands: []*cli.Command{{
			Name:      "oz-monitor",
			Usage:     "convert an OpenZeppelin Monitor configuration (networks/, monitors/, triggers/) into an rflow project",
			ArgsUsage: "CONFIG_DIR -o DIR",
			Description: "Writes rflow.yaml, abis/, workflows/, .env.example and IMPORT.md into DIR (new or empty):\n" +
				"one network per EVM network, one contract per watched address, one workflow per (monitor,\n" +
				"event condition, contract) with the condition as where: and the monitor's triggers as steps.\n" +
				"What has no rflow equivalent is listed on stderr and in IMPORT.md; the command then exits 1\n" +
				"unless --partial. See docs/import.md.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the project directory to write (new or empty)"},
				&cli.BoolFlag{Name: "partial", Usage: "exit 0 even when parts of the configuration were left out"},
				&cli.BoolFlag{Name: "force", Usage: "write into a non-empty directory, replacing files of the same names"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usagef("import oz-monitor takes one configuration directory (the one holding networks/, monitors/ and triggers/), got %d arguments", c.NArg())
				}
				if c.String("output") == "" {
					return usagef("import oz-monitor needs -o DIR, the project directory to write (new or empty)")
				}
				r, err := ozimport.Import(c.Args().First(), c.String("output"), ozimport.Options{Force: c.Bool("force")})
				if err != nil {
					return err
				}
				return reportImport(c, r)
			},
		}},
	}
}

// reportImport prints what the import wrote, and what it left out on
// stderr; left-out parts fail the command unless --partial.
func reportImport(c *cli.Context, r *ozimport.Result) error {
	w := c.App.Writer
	for _, f := range r.Files {
		fmt.Fprintln(w, "created", r.Dir+"/"+f)
	}
	fmt.Fprintf(w, "\n%d network(s), %d contract(s), %d workflow(s)", len(r.Networks), r.Contracts, len(r.Workflows))
	if r.PausedWorkflows > 0 {
		fmt.Fprintf(w, " (%d paused, not included)", r.PausedWorkflows)
	}
	fmt.Fprintln(w)
	if len(r.Env) > 0 {
		names := make([]string, 0, len(r.Env))
		for _, e := range r.Env {
			names = append(names, e.Name)
		}
		fmt.Fprintf(w, "The project reads %s (see %s/.env.example).\n", strings.Join(names, ", "), r.Dir)
	}
	fmt.Fprintf(w, "Next: rflow validate -c %s/rflow.yaml\n", r.Dir)
	left := r.LeftOut()
	for _, f := range left {
		fmt.Fprintln(c.App.ErrWriter, "left out:", f)
	}
	if len(left) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d part(s) of the Monitor configuration were left out (listed above and in %s/IMPORT.md, with what to do instead)", len(left), r.Dir)
	if c.Bool("partial") {
		fmt.Fprintln(c.App.ErrWriter, "rflow:", msg+"; --partial accepts that")
		return nil
	}
	return cli.Exit(msg+"; pass --partial to accept a partial import", exitFailure)
}
