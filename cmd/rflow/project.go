package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/workflow"
)

func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "rflow.yaml", Usage: "project file"}
}

// projectFileMissing is the one-line error of a command that needs the
// project file when there is none at --config: where it looked and how to
// get one. It is nil when the file exists (or cannot be checked: the loader
// then reports why).
func projectFileMissing(c *cli.Context) error {
	path := c.String("config")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	where := path
	if !c.IsSet("config") {
		where = "no -c, and the current directory has no rflow.yaml"
		if wd, err := os.Getwd(); err == nil {
			where = "no -c, and " + wd + " has no rflow.yaml"
		}
	}
	return cli.Exit(fmt.Sprintf("%s: no such project file; pass -c path/to/rflow.yaml, or create a project with `rflow init`", where), exitFailure)
}

// projectName reads just the name: of the project file, when there is one
// (with ${VAR} substitution, as the full loader does); it keys the embedded
// database's data directory.
func projectName(c *cli.Context) string {
	name, err := workflow.ProjectName(c.String("config"), nil)
	if err != nil || name == "" {
		return "default"
	}
	return name
}
