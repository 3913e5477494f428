package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rflow-dev/rflow/workflow"
)

// projectWatch notices edits of a project's files (rflow dev) and hands
// each edited project that loads and checks to the generation loop
// (devGenerations); one that does not is refused, once per edit, with its
// problems at file:line:col, and the running generation goes on. Polling
// the files' modification times every second is plenty for an editor's
// saves and needs no watcher per directory.
type projectWatch struct {
	dir  string
	load func() (*workflow.Project, error)
	// check refuses a project that loads but cannot run: a network whose
	// node answers another chain id, say (checkNetworks).
	check func(context.Context, *workflow.Project) error
	view  *devView
	every time.Duration
	// changes holds at most the newest accepted change not yet taken.
	changes chan projectChange
}

// projectChange is an edited project that loaded and passed its checks.
type projectChange struct {
	project *workflow.Project
	files   string // the changed files, for messages
	// rollback: the previous project, started again after the edited
	// one did not start.
	rollback bool
}

func newProjectWatch(dir string, load func() (*workflow.Project, error), check func(context.Context, *workflow.Project) error, view *devView) *projectWatch {
	return &projectWatch{dir: dir, load: load, check: check, view: view, every: time.Second, changes: make(chan projectChange, 1)}
}

// fileStamp is what tells a changed file from an unchanged one.
type fileStamp struct {
	mod  time.Time
	size int64
}

// run polls until ctx ends.
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

// reload loads the whole project again, rflow.yaml and every workflow
// file, and offers it as the next generation.
func (w *projectWatch) reload(ctx context.Context, changed []string) {
	what := strings.Join(changed, ", ")
	p, err := w.load()
	if err == nil {
		err = w.check(ctx, p)
	}
	if err != nil {
		if ctx.Err() == nil {
			w.view.reloadFailed(what, err)
		}
		return
	}
	// A change the loop has not taken yet is replaced: the newest files
	// are what the next generation runs.
	select {
	case <-w.changes:
	default:
	}
	w.changes <- projectChange{project: p, files: what}
}

// stamps lists the project's YAML files and the JSON of its ABIs
// (relative to its directory).
func (w *projectWatch) stamps() map[string]fileStamp {
	out := map[string]fileStamp{}
	_ = filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // a file removed while walking is seen next time
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
		default:
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
