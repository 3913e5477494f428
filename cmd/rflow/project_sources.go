package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// saveSources records the project's source files in the database as it
// is deployed, so operator commands that compile its workflows (runs
// retry, workflows resume) work without them. A project that reads a file
// outside its directory, or a file that is not text, is not recorded:
// those commands then need the files, as before.
func saveSources(ctx context.Context, db store.DBTX, p *workflow.Project) error {
	files, ok := p.Sources()
	if !ok {
		return nil
	}
	text := make(map[string]string, len(files))
	for name, b := range files {
		if !utf8.Valid(b) {
			return nil
		}
		text[name] = string(b)
	}
	return store.SaveProjectSources(ctx, db, p.Name, p.File(), text)
}

// deployedProject loads the project as last deployed to db, from the
// sources saveSources recorded, for an operator command run where the
// project file is not (missing is the error that says so). ${VAR}
// references to unset variables are left out, as openOperatorEngine does.
func deployedProject(c *cli.Context, db *database, missing error) (*workflow.Project, error) {
	all, err := store.ProjectSources(c.Context, db.Pool)
	if err != nil {
		return nil, err
	}
	switch {
	case len(all) == 0:
		return nil, missing
	case len(all) > 1:
		names := make([]string, len(all))
		for i, s := range all {
			names[i] = s.Project
		}
		return nil, cli.Exit(fmt.Sprintf("%v; the database holds projects %s: pass -c with the one you mean",
			missing, strings.Join(names, ", ")), exitFailure)
	}
	src := all[0]
	dir, err := os.MkdirTemp("", "rflow-deployed-")
	if err != nil {
		return nil, fmt.Errorf("project %s as deployed: %w", src.Project, err)
	}
	defer os.RemoveAll(dir)
	for name, text := range src.Files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("project %s as deployed: file %q is outside its directory", src.Project, name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("project %s as deployed: %w", src.Project, err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return nil, fmt.Errorf("project %s as deployed: %w", src.Project, err)
		}
	}
	p, err := workflow.Load(filepath.Join(dir, filepath.FromSlash(src.Main)), workflow.LoadOptions{AllowUnsetEnv: true})
	if err != nil {
		return nil, fmt.Errorf("project %s as deployed %s does not load: %w", src.Project, src.DeployedAt.UTC().Format(time.RFC3339), err)
	}
	fmt.Fprintf(c.App.ErrWriter, "rflow: no %s here: using project %s as deployed %s (kept in the database)\n",
		c.String("config"), src.Project, src.DeployedAt.UTC().Format(time.RFC3339))
	return p, nil
}
