// Package flowtest runs workflow tests: fixture files beside a project
// (package fixture) that give a workflow occurrences (logs, cron ticks,
// webhook requests, manual inputs, read results), stub the HTTP responses
// its steps get, and state what must come out (which runs, which steps ran
// or were skipped, each request and send, outputs, final status). Tests
// run on the project's Postgres under namespaced workflow names
// (store.Rehearsal of kind test) in an engine of their own (jobs.Rehearsal), so they
// never touch a live workflow's rows, and they delete every row they made.
package flowtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// Options configure a test session.
type Options struct {
	Pool    *pgxpool.Pool
	Project *workflow.Project
	Logger  *slog.Logger
	// Run, when set, selects the tests whose name it matches.
	Run *regexp.Regexp
	// Parallel is how many tests run at once (default 4).
	Parallel int
	// Timeout bounds how long one run may take to settle (default 30s).
	Timeout time.Duration
}

// Result is one test's outcome.
type Result struct {
	File     string        `json:"file"`
	Name     string        `json:"name"`
	Passed   bool          `json:"passed"`
	Elapsed  time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
	Failures []Failure     `json:"failures,omitempty"`
}

// Discover lists the fixture files of a project directory: tests/ and its
// subdirectories, *.test.yaml, in name order.
func Discover(dir string) ([]string, error) {
	var files []string
	root := filepath.Join(dir, "tests")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && path == root {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), fixture.Suffix) {
			files = append(files, path)
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

// Run runs the tests of files on one engine of its own: a River schema
// made for the session (and dropped after it), and each test under its
// own namespaced workflow (testRehearsal) whose rows are deleted when
// it ends. Tests run in parallel; the occurrences of one test run one
// after the other, each run settling before the next occurrence, so its
// requests and sends come out in a stable order.
func Run(ctx context.Context, opts Options, files []*fixture.File) ([]Result, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	type job struct {
		f *fixture.File
		t *fixture.Test
	}
	var todo []job
	for _, f := range files {
		for _, t := range f.Tests {
			if opts.Run == nil || opts.Run.MatchString(t.Name) {
				todo = append(todo, job{f, t})
			}
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	id := uuid.New()
	schema := "rehearsal_" + strings.ReplaceAll(id.String(), "-", "")
	cleanup := context.WithoutCancel(ctx)
	// Running: a sweep (rflow replay prune --all) leaves this session's
	// rows and schema alone until it lets go, or dies.
	release, err := store.HoldTestSession(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := store.CreateRehearsalRiver(ctx, opts.Pool, schema); err != nil {
		_ = store.DropRehearsalRiver(cleanup, opts.Pool, schema)
		return nil, err
	}
	defer func() { _ = store.DropRehearsalRiver(cleanup, opts.Pool, schema) }()
	rt := newRouter()
	e, err := jobs.NewEngine(jobs.Config{
		Pool: opts.Pool, Project: opts.Project, Logger: opts.Logger,
		Workers: 8, HTTPClient: &http.Client{Transport: rt},
		Rehearsal: &jobs.Rehearsal{Rehearsal: store.Rehearsal{Kind: store.RehearsalTest}, RiverSchema: schema, Send: rt.send},
	})
	if err != nil {
		return nil, err
	}
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	if err := e.Start(ectx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(cleanup, 5*time.Second)
		defer cancel()
		_ = e.Stop(sctx)
	}()

	results := make([]Result, len(todo))
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	for i, j := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := &session{opts: opts, e: e, rt: rt, schema: schema}
			start := time.Now()
			fails := s.run(ctx, j.t)
			el := time.Since(start)
			results[i] = Result{File: j.f.Path, Name: j.t.Name, Passed: len(fails) == 0, Elapsed: el,
				Seconds: el.Round(10 * time.Millisecond).Seconds(), Failures: fails}
		}()
	}
	wg.Wait()
	return results, nil
}

// testRehearsal is the rehearsal one test of workflow runs as: a session
// of its own, test_<id>__<workflow>, so tests of one workflow run in
// parallel apart.
func testRehearsal(id uuid.UUID, workflow string) store.Rehearsal {
	return store.Rehearsal{Kind: store.RehearsalTest, Session: id.String(), Workflow: workflow}
}

type session struct {
	opts Options
	e    *jobs.Engine
	rt   *router
	// schema is the session's River schema, where its runs' jobs wait.
	schema string
}

// run runs one test and returns what did not hold.
func (s *session) run(ctx context.Context, t *fixture.Test) []Failure {
	failAt := func(pos workflow.Position, format string, args ...any) []Failure {
		return []Failure{{Pos: pos, At: pos.String(), Message: fmt.Sprintf(format, args...)}}
	}
	wf := s.opts.Project.Workflow(t.Workflow)
	if wf == nil {
		return failAt(t.WfPos, "workflow %s is not in the project", t.Workflow)
	}
	id := uuid.New()
	r := testRehearsal(id, wf.Name)
	name := r.Name()
	c := newClaimer(s.opts.Project, wf, id)
	rec := &recorder{stubs: t.HTTP}
	var runs []uuid.UUID
	defer func() {
		for _, r := range runs {
			s.rt.forget(r)
		}
		// Every row the test made goes, even when the session is
		// interrupted.
		_, err := store.PruneRehearsals(context.WithoutCancel(ctx), s.opts.Pool,
			store.RehearsalPruneFilter{Kind: r.Kind, Session: r.Session})
		if err != nil {
			s.opts.Logger.Warn("rflow test: clean up", "workflow", name, "err", err)
		}
	}()
	err := pgx.BeginFunc(ctx, s.opts.Pool, func(tx pgx.Tx) error {
		_, err := store.DeployWorkflow(ctx, tx, name, wf.Hash, wf.Spec)
		return err
	})
	if err != nil {
		return failAt(t.Pos, "deploy %s: %v", name, err)
	}
	// The test's clock: a test that says advance: moves it only so; one
	// that does not skips each timer its runs reach (see clock.go).
	clk := &clock{s: s, skip: !slices.ContainsFunc(t.Given, func(o fixture.Occurrence) bool { return o.Advance > 0 })}
	until := func(i int) string {
		if i < len(t.Expect.Runs) {
			st, _ := t.Expect.Runs[i].Value.(map[string]any)["status"].(string)
			return st
		}
		return ""
	}
	for i, o := range t.Given {
		if o.Advance > 0 {
			if err := clk.advance(ctx, runs, o.Advance, until); err != nil {
				return failAt(o.Pos, "advance %s: %v", o.Advance, err)
			}
			continue
		}
		claim, ok, err := c.claim(o)
		var oe *occurrenceError
		if errors.As(err, &oe) {
			return failAt(oe.pos, "%s", oe.msg)
		}
		if err != nil {
			return failAt(o.Pos, "%v", err)
		}
		if !ok {
			continue // the trigger's condition refused it: no run, as on chain
		}
		var run uuid.UUID
		var created bool
		err = pgx.BeginFunc(ctx, s.opts.Pool, func(tx pgx.Tx) error {
			var err error
			run, created, err = s.e.StartRunTx(ctx, tx, claim)
			if err == nil && created {
				s.rt.own(run, rec) // before commit: its first job may run at once
			}
			return err
		})
		if err != nil {
			return failAt(o.Pos, "claim: %v", err)
		}
		if !created {
			continue // the same key: the claim gate made no second run
		}
		runs = append(runs, run)
		if err := clk.settle(ctx, run, until(len(runs)-1)); err != nil {
			return failAt(o.Pos, "occurrence %d: %v", i+1, err)
		}
	}
	return s.check(ctx, t, runs, rec)
}

// check compares what came out with the test's expectations.
func (s *session) check(ctx context.Context, t *fixture.Test, runs []uuid.UUID, rec *recorder) []Failure {
	var out []Failure
	e := t.Expect
	observed := make([]any, 0, len(runs))
	for _, id := range runs {
		o, err := s.observe(ctx, id)
		if err != nil {
			return []Failure{{Pos: t.Pos, At: t.Pos.String(), Message: err.Error()}}
		}
		observed = append(observed, o)
	}
	switch {
	case e.RunCount != nil && *e.RunCount != len(runs):
		out = append(out, Failure{Pos: e.RunsPos, At: e.RunsPos.String(), Path: "runs",
			Message: fmt.Sprintf("want %d run(s), got %d", *e.RunCount, len(runs))})
	case e.Runs != nil && len(e.Runs) != len(runs):
		out = append(out, Failure{Pos: e.RunsPos, At: e.RunsPos.String(), Path: "runs",
			Message: fmt.Sprintf("want %d run(s), got %d", len(e.Runs), len(runs)), Diff: diff(wants(e.Runs), project(wants(e.Runs), observed))})
	default:
		for i, w := range e.Runs {
			out = append(out, matchOne(w, fmt.Sprintf("runs[%d]", i), observed[i])...)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, u := range rec.unmocked {
		out = append(out, Failure{Pos: t.Pos, At: t.Pos.String(), Path: "http",
			Message: "no stub for " + u + " (add one under http:, answered 404)"})
	}
	out = append(out, matchList(e.Requests, e.ReqPos, "requests", rec.requests)...)
	out = append(out, matchList(e.Sends, e.SendsPos, "sends", rec.sends)...)
	return out
}

func matchList(ws []fixture.Want, pos workflow.Position, what string, got []any) []Failure {
	if ws == nil {
		return nil
	}
	if len(ws) != len(got) {
		return []Failure{{Pos: pos, At: pos.String(), Path: what,
			Message: fmt.Sprintf("want %d %s, got %d", len(ws), what, len(got)), Diff: diff(wants(ws), project(wants(ws), got))}}
	}
	var out []Failure
	for i, w := range ws {
		out = append(out, matchOne(w, fmt.Sprintf("%s[%d]", what, i), got[i])...)
	}
	return out
}

// matchOne checks one expectation (a run, a request, a send); a failure
// on a scalar inside it gets the diff of the whole expectation (once), so
// the reader sees it in context.
func matchOne(w fixture.Want, path string, got any) []Failure {
	var out []Failure
	match(w, path, path, w.Value, got, &out)
	// Once is enough: several failures in one expectation share its diff.
	for i := range out {
		if out[i].Diff == "" {
			out[i].Diff = diff(w.Value, got)
			break
		}
	}
	return out
}

func wants(ws []fixture.Want) []any {
	out := make([]any, len(ws))
	for i, w := range ws {
		out[i] = w.Value
	}
	return out
}

// observe is a run as expectations see it: status, error, the steps that
// ran, were skipped or failed (journal order), and each step's output.
func (s *session) observe(ctx context.Context, id uuid.UUID) (map[string]any, error) {
	run, err := store.GetRun(ctx, s.opts.Pool, id, false)
	if err != nil {
		return nil, err
	}
	steps, err := store.RunSteps(ctx, s.opts.Pool, id)
	if err != nil {
		return nil, err
	}
	ran, skipped, failed := []any{}, []any{}, []any{}
	outputs := map[string]any{}
	for _, st := range steps {
		switch st.Status {
		case store.StepCompleted:
			ran = append(ran, st.Key)
		case store.StepSkipped:
			skipped = append(skipped, st.Key)
		case store.StepFailed:
			failed = append(failed, st.Key)
		}
		if len(st.Output) > 0 {
			if v, err := plainJSON(st.Output); err == nil {
				outputs[st.Key] = v
			}
		}
	}
	o := map[string]any{
		"status":  string(run.Status),
		"steps":   map[string]any{"ran": ran, "skipped": skipped, "failed": failed},
		"outputs": outputs,
		"error":   "",
	}
	if run.Error != nil {
		o["error"] = *run.Error
	}
	return o, nil
}
