package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "migrate",
		Usage:     "apply database migrations (River's and rflow's); also done by start",
		ArgsUsage: "[up|status]",
		Flags:     []cli.Flag{configFlag()},
		Action: func(c *cli.Context) error {
			verb := "up"
			if c.NArg() > 1 {
				return usagef("migrate takes at most one argument (up or status)")
			}
			if c.NArg() == 1 {
				verb = c.Args().First()
			}
			if verb != "up" && verb != "status" {
				return usagef("migrate: unknown action %q (want up or status)", verb)
			}
			logger := newLogger(c)
			open := openDatabase
			if verb == "status" {
				open = openExisting // a status never creates a database
			}
			db, err := open(c, projectName(c), logger)
			if err != nil {
				return err
			}
			defer db.Close()
			if db.Embedded != nil {
				fmt.Fprintf(c.App.ErrWriter, "using embedded postgres in %s (set --database-url for production)\n", db.Embedded.DataDir())
			}
			if verb == "status" {
				return migrateStatus(c, db)
			}
			res, err := store.Migrate(c.Context, db.Pool, nil)
			if err != nil {
				return err
			}
			if projectFileMissing(c) == nil {
				// The project of the file registers, as its start would: on
				// an upgraded database this is how its owner claims its
				// bare workflows before another project starts.
				ns, err := store.RegisterProject(c.Context, db.Pool, fileProjectName(c))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "%s: workflows stored as %s, River queue %s\n", ns.Describe(), ns.Qualify("<name>"), ns.Queue())
			}
			if len(res.Applied) == 0 && len(res.RiverApplied) == 0 {
				fmt.Fprintln(c.App.Writer, "database is up to date")
				return nil
			}
			if len(res.RiverApplied) > 0 {
				fmt.Fprintf(c.App.Writer, "applied %d river migration(s)\n", len(res.RiverApplied))
			}
			for _, m := range res.Applied {
				fmt.Fprintf(c.App.Writer, "applied %03d_%s\n", m.Version, m.Name)
			}
			return nil
		},
	}
}

func migrateStatus(c *cli.Context, db *database) error {
	migs, riverPending, err := store.MigrationStatus(c.Context, db.Pool)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tNAME\tAPPLIED")
	for _, m := range migs {
		at := "pending"
		if m.AppliedAt != nil {
			at = m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%03d\t%s\t%s\n", m.Version, m.Name, at)
	}
	w.Flush()
	if len(riverPending) > 0 {
		fmt.Fprintf(c.App.Writer, "river: %d migration(s) pending\n", len(riverPending))
	} else {
		fmt.Fprintln(c.App.Writer, "river: up to date")
	}
	return nil
}
