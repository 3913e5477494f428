package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// projectWatch deploys a project's workflows again when its files change
// (rflow dev). Polling the YAML files' modification times every second is
// plenty for an editor's saves and needs no watcher per directory.
type projectWatch struct {
	dir   string
	load  func() (*workflow.Project, error)
	pool  *pgxpool.Pool
	view  *devView
	every time.Duration
}

// fileStamp is what tells a changed file from an unchanged one.
type fileStamp struct {
	mod  time.Time
	size int64
}

// run polls until ctx ends. Each change is either a new generation of
// every workflow whose definition changed (runs in flight keep the
// generation they started on) or the validate errors, and then the
// previous generation keeps running.
func (w *projectWatch) run(ctx context.Context) {
	last := w.stamps()
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := w.stamps()
		changed := changedFiles(last, now)
		if len(changed) == 0 {
			continue
		}
		last = now
		w.reload(ctx, changed)
	}
}

func (w *projectWatch) reload(ctx context.Context, changed []string) {
	what := strings.Join(changed, ", ")
	p, err := w.load()
	if err != nil {
		w.view.reloadFailed(what, err)
		return
	}
	// An engine that is never started deploys, as `rflow workflows deploy`
	// does; the running engine picks the new generations up for new runs.
	ns, err := store.LookupNamespace(ctx, w.pool, p.Name)
	if err != nil {
		w.view.reloadFailed(what, err)
		return
	}
	e, err := jobs.NewEngine(jobs.Config{Pool: w.pool, Project: p, Namespace: ns})
	if err != nil {
		w.view.reloadFailed(what, err)
		return
	}
	var deployed []store.Deployed
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		deployed, err = e.DeployWorkflows(ctx, tx, nil)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			w.view.reloadFailed(what, err)
		}
		return
	}
	for _, d := range deployed {
		if !d.Changed {
			continue
		}
		file := what
		if wf := p.Workflow(d.Name); wf != nil && wf.Pos.File != "" {
			file = w.rel(wf.Pos.File)
		}
		w.view.reloaded(file, d)
	}
}

// stamps lists the project's YAML files (relative to its directory).
func (w *projectWatch) stamps() map[string]fileStamp {
	out := map[string]fileStamp{}
	_ = filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // a file removed while walking is seen next time
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			out[w.rel(path)] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
		}
		return nil
	})
	return out
}

func (w *projectWatch) rel(path string) string {
	if r, err := filepath.Rel(w.dir, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// changedFiles are the files added, removed or changed between two stamps.
func changedFiles(before, after map[string]fileStamp) []string {
	var out []string
	for f, s := range after {
		if b, ok := before[f]; !ok || b != s {
			out = append(out, f)
		}
	}
	for f := range before {
		if _, ok := after[f]; !ok {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}
