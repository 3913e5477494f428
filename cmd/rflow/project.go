package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
// database's data directory. With no -c and no rflow.yaml here, it is the
// quickstart's, once `rflow dev` has run it (and no project named default
// has a database): `rflow runs list` after the quickstart needs no flag.
func projectName(c *cli.Context) string {
	name, err := workflow.ProjectName(c.String("config"), nil)
	switch {
	case err == nil && name != "":
		return name
	case err != nil && !c.IsSet("config") && errors.Is(err, fs.ErrNotExist) &&
		!hasEmbeddedDatabase(defaultProject) && hasEmbeddedDatabase(quickstartName):
		return quickstartName
	}
	return defaultProject
}

// defaultProject keys the embedded database of commands run with no
// project file.
const defaultProject = "default"

// hasEmbeddedDatabase reports whether project has an embedded cluster.
func hasEmbeddedDatabase(project string) bool {
	dir, err := embeddedDataDir(project)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "data", "PG_VERSION"))
	return err == nil
}
