package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
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
// database's data directory. With no -c and no rflow.yaml here (and no
// project named default with a database), it is the project `rflow dev`
// last ran on its embedded database (the quickstart, or --project
// examples/approvals), else the quickstart's once `rflow dev` has run it:
// `rflow runs list` and `rflow approve <id>` after `rflow dev` need no flag.
func projectName(c *cli.Context) string {
	name, err := workflow.ProjectName(c.String("config"), nil)
	switch {
	case err == nil && name != "":
		return name
	case err != nil && !c.IsSet("config") && errors.Is(err, fs.ErrNotExist) && !hasEmbeddedDatabase(defaultProject):
		if last := lastDevProject(); last != "" && hasEmbeddedDatabase(last) {
			return last
		}
		if hasEmbeddedDatabase(quickstartName) {
			return quickstartName
		}
	}
	return defaultProject
}

// devProjectFile, in the folder of the embedded databases, names the
// project `rflow dev` last ran on its embedded database. A project name
// starts with a letter, so it is never a project's folder.
const devProjectFile = ".dev-project"

// rememberDevProject records that `rflow dev` runs project on its
// embedded database, for commands typed afterwards without -c.
func rememberDevProject(project string) error {
	home, err := rflowDataHome()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, devProjectFile), []byte(project+"\n"), 0o644); err != nil {
		return fmt.Errorf("remember the dev project: %w", err)
	}
	return nil
}

// lastDevProject is the project rememberDevProject recorded ("" when none
// was, or the record is not a project name).
func lastDevProject() string {
	home, err := rflowDataHome()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(home, devProjectFile))
	if err != nil {
		return ""
	}
	name := strings.TrimSpace(string(b))
	if !workflow.ValidProjectName(name) {
		return ""
	}
	return name
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

// readNamespace is the project's namespace in the database for a command
// that only reads (or acts on rows that are there): it registers nothing,
// so `runs list` of a project that never started cannot make it the
// database's home project. project is rflow.yaml's name: ("" when unset).
func readNamespace(ctx context.Context, db store.DBTX, project string) (store.Namespace, error) {
	ns, err := store.LookupNamespace(ctx, db, project)
	if err != nil {
		return ns, noSchema(err)
	}
	return ns, nil
}

// fileProjectName is rflow.yaml's name: as the file has it ("" when it has
// none or cannot be read: the loader then says why, where it matters).
func fileProjectName(c *cli.Context) string {
	name, _ := workflow.ProjectName(c.String("config"), nil)
	return name
}
