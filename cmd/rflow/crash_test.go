package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// rflowBin is the rflow binary the process tests run, built once.
var rflowBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rflow-bin-")
	if err != nil {
		panic(err)
	}
	rflowBin = filepath.Join(dir, "rflow")
	out, err := exec.Command("go", "build", "-o", rflowBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build rflow: %v\n%s", err, out)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	storetest.Main(m)
}

// sink is a loopback endpoint counting requests per Idempotency-Key.
type sink struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func newSink(t *testing.T) *sink {
	s := &sink{seen: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.seen[r.Header.Get("Idempotency-Key")]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items": [1, 2, 3]}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.seen))
	for k, v := range s.seen {
		out[k] = v
	}
	return out
}

const crashProject = `
name: crash
workflows:
  - name: pipeline
    trigger: { %s }
    steps:
      - id: a
        http_call: { method: POST, url: "%[2]s/a", body: { run: "${{ run.id }}" } }
      - id: each
        foreach: "${{ steps.a.output.body.items }}"
        concurrency: 2
        steps:
          - id: ping
            http_call: { method: POST, url: "%[2]s/ping", body: { item: "${{ item }}" } }
      - id: b
        http_call: { method: POST, url: "%[2]s/b" }
`

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

// startRflow runs `rflow start` as a child process.
func startRflow(t *testing.T, dbURL, config, fault string) *proc {
	t.Helper()
	return startRflowWorkers(t, dbURL, config, fault, 8)
}

func startRflowWorkers(t *testing.T, dbURL, config, fault string, workers int) *proc {
	t.Helper()
	return startRflowArgs(t, []string{"RFLOW_FAULT=" + fault}, "--database-url", dbURL, "--log-level", "warn", "start", "-c", config,
		"--workers", fmt.Sprint(workers))
}

// startRflowArgs runs rflow with args (and env added to the environment)
// as a child process, killed at the end of the test.
func startRflowArgs(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(rflowBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and requires a clean exit 0 within 15 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("rflow did not stop on SIGTERM; output:\n%s", p.out)
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "output:\n%s", p.out)
}

// waitKilled waits for the process to die by its fault point's SIGKILL.
func (p *proc) waitKilled(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("fault point never hit; output:\n%s", p.out)
	}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "expected death by SIGKILL, got %v; output:\n%s", p.cmd.ProcessState, p.out)
}

func writeProject(t *testing.T, trigger, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(crashProject, trigger, url)), 0o644))
	return path
}

// enqueueManual claims n manual runs through the engine's claim gate, from
// this process, the way `rflow run` does.
func enqueueManual(t *testing.T, pool *pgxpool.Pool, config string, n int) {
	t.Helper()
	enqueueManualKeys(t, pool, config, "m", n)
}

// enqueueManualKeys claims n manual runs keyed <prefix>0000, <prefix>0001, …
func enqueueManualKeys(t *testing.T, pool *pgxpool.Pool, config, prefix string, n int) {
	t.Helper()
	enqueueWorkflowRuns(t, pool, config, "pipeline", prefix, n)
}

// enqueueWorkflowRuns claims n manual runs of workflow wf keyed
// <prefix>0000, <prefix>0001, …
func enqueueWorkflowRuns(t *testing.T, pool *pgxpool.Pool, config, wf, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	project, err := workflow.Load(config, workflow.LoadOptions{})
	require.NoError(t, err)
	_, err = store.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project})
	require.NoError(t, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	claims := make([]store.Claim, n)
	for i := range claims {
		claims[i] = store.Claim{Workflow: wf, TriggerKey: fmt.Sprintf("%s%04d", prefix, i), TriggerKind: "manual", Trigger: []byte(`{}`)}
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := e.ClaimTx(ctx, tx, claims)
		return err
	}))
}

// waitAllDone waits until every started run completed and returns those
// runs. Runs claimed while their workflow is paused have no journal yet
// (they wait for a resume) and are not counted.
func waitAllDone(t *testing.T, pool *pgxpool.Pool, min int, within time.Duration) []*store.Run {
	t.Helper()
	var runs []*store.Run
	require.Eventually(t, func() bool {
		// Errors are retried: a test that restarts Postgres leaves this
		// pool with connections the server has closed.
		all, err := store.ListRuns(context.Background(), pool, store.RunFilter{Limit: 1000})
		if err != nil {
			return false
		}
		runs = runs[:0]
		for _, r := range all {
			var started bool
			if err := pool.QueryRow(context.Background(),
				`SELECT EXISTS (SELECT 1 FROM rflow.step_runs WHERE run_id = $1)`, r.ID).Scan(&started); err != nil {
				return false
			}
			if !started {
				continue
			}
			if r.Status != store.RunCompleted {
				return false
			}
			runs = append(runs, r)
		}
		return len(runs) >= min
	}, within, 100*time.Millisecond, "runs did not all complete")
	return runs
}

// checkExactlyOnce asserts the journal and the receiver agree: every step of
// every run completed once and reached the endpoint; no key was delivered
// twice, except at most `window` keys in the documented at-most-once window
// (a crash after the effect, before its outcome), and those with the same
// Idempotency-Key.
func checkExactlyOnce(t *testing.T, pool *pgxpool.Pool, s *sink, runs []*store.Run, window int) {
	t.Helper()
	seen := s.counts()
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	require.LessOrEqual(t, dups, window, "duplicated deliveries beyond the at-most-once window: %v", dupKeys(seen))
	for _, r := range runs {
		steps, err := store.RunSteps(context.Background(), pool, r.ID)
		require.NoError(t, err)
		require.Len(t, steps, 6, "run %s: a, each, ping[0..2], b", r.ID)
		for _, st := range steps {
			require.Equal(t, store.StepCompleted, st.Status, "run %s step %s", r.ID, st.Key)
			if st.Kind == "http_call" {
				require.GreaterOrEqual(t, seen[r.ID.String()+":"+st.Key], 1, "run %s step %s never reached the endpoint", r.ID, st.Key)
			}
		}
	}
}

func dupKeys(seen map[string]int) []string {
	var out []string
	for k, n := range seen {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", k, n))
		}
	}
	return out
}

func TestCrashAtEachFaultPoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		point  string
		cron   bool
		window int
	}{
		// The claim commits while the one worker may be inside an
		// earlier run's effect: that step is in the window.
		{jobs.FaultAfterClaim, true, 1},
		{jobs.FaultAfterJournal + ":3", false, 0},
		{jobs.FaultAfterEffect + ":3", false, 1},
		// The outcome is committed but the job is not completed (River's
		// completer does that after Work returns): its second run must
		// find the step settled and do nothing.
		{jobs.FaultAfterOutcome + ":3", false, 0},
		{jobs.FaultMidForeach + ":2", false, 0},
	}
	for _, tc := range cases {
		t.Run(strings.Split(tc.point, ":")[0], func(t *testing.T) {
			t.Parallel()
			s := newSink(t)
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(context.Background(), dbURL)
			require.NoError(t, err)
			defer pool.Close()
			trigger := "manual: {}"
			if tc.cron {
				trigger = `cron: { schedule: "@every 1s" }`
			}
			config := writeProject(t, trigger, s.URL)
			if !tc.cron {
				enqueueManual(t, pool, config, 5)
			}
			// One worker: exactly one step is in flight when the fault
			// point kills the process, so the at-most-once window is
			// exactly that step.
			startRflowWorkers(t, dbURL, config, tc.point, 1).waitKilled(t, 30*time.Second)

			p := startRflow(t, dbURL, config, "")
			if tc.cron {
				// Let a few more ticks through, then stop starting runs and
				// let everything drain (runs claimed while paused wait
				// without steps; waitAllDone leaves them out).
				time.Sleep(2 * time.Second)
				_, err := pool.Exec(context.Background(), `UPDATE rflow.workflows SET paused = true`)
				require.NoError(t, err)
			}
			runs := waitAllDone(t, pool, 1, 60*time.Second)
			if !tc.cron {
				require.Len(t, runs, 5)
			}
			p.stop(t)
			checkExactlyOnce(t, pool, s, runs, tc.window)
		})
	}
}

// soakWorkers is how many steps each soak process works at once.
const soakWorkers = 8

func TestSoakRandomKills(t *testing.T) {
	t.Parallel()
	runs, kills := 100, 6
	if os.Getenv("RFLOW_SOAK") == "large" {
		runs, kills = 1000, 40
	}
	s := newSink(t)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	config := writeProject(t, "manual: {}", s.URL)
	enqueueManual(t, pool, config, runs)
	points := []string{jobs.FaultAfterJournal, jobs.FaultAfterEffect, jobs.FaultAfterOutcome, jobs.FaultMidForeach}
	for i := 0; i < kills; i++ {
		point := points[rand.IntN(len(points))]
		p := startRflowWorkers(t, dbURL, config, fmt.Sprintf("%s:%d", point, 1+rand.IntN(40)), soakWorkers)
		select {
		case <-p.done:
		case <-time.After(time.Duration(500+rand.IntN(3000)) * time.Millisecond):
			// Not hit yet: kill it from outside, at an arbitrary moment.
			p.kill()
		}
	}
	p := startRflow(t, dbURL, config, "")
	all := waitAllDone(t, pool, runs, 3*time.Minute)
	require.Len(t, all, runs)
	p.stop(t)
	// Each kill can land in the effect window of every step in flight:
	// at most one per worker.
	checkExactlyOnce(t, pool, s, all, kills*soakWorkers)
}

func TestTwoProcessesShareTheWork(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	config := writeProject(t, `cron: { schedule: "@every 1s" }`, s.URL)
	a := startRflow(t, dbURL, config, "")
	b := startRflow(t, dbURL, config, "")
	// Enqueue once both are up, so neither can drain the queue alone.
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(context.Background(), `SELECT count(*) FROM rflow.nodes`).Scan(&n) == nil && n == 2
	}, 30*time.Second, 50*time.Millisecond)
	enqueueManual(t, pool, config, 20)
	time.Sleep(4 * time.Second)
	_, err = pool.Exec(context.Background(), `UPDATE rflow.workflows SET paused = true`)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	runs := waitAllDone(t, pool, 23, 60*time.Second)
	a.stop(t)
	b.stop(t)
	// One run per tick, and no step executed twice by the two processes.
	ticks := map[string]bool{}
	for _, r := range runs {
		if r.TriggerKind != "cron" {
			continue
		}
		require.False(t, ticks[r.TriggerKey], "tick %s claimed twice", r.TriggerKey)
		ticks[r.TriggerKey] = true
	}
	checkExactlyOnce(t, pool, s, runs, 0)
	var nodes int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(DISTINCT attempted_by[1]) FROM river.river_job WHERE kind IN ('rflow.step', 'rflow.step.first')`).Scan(&nodes))
	require.Equal(t, 2, nodes, "both processes worked steps")
}
