package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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

const breakerCrashProject = `
name: breaker
notifiers:
  - { name: pager, webhook: "%[1]s/page" }
workflows:
  - name: flaky
    trigger: { manual: {} }
    circuit_breaker: { failures: 3, window: 10m, notify: pager }
    steps:
      - id: call
        http_call: { method: POST, url: "%[1]s/work" }
`

// TestCircuitBreakerTripSurvivesKill: concurrent failing runs trip the
// breaker once; rflow start is killed -9 right after the trip committed,
// before its page went out. After a restart the workflow is still paused,
// the page goes out exactly once, claims made meanwhile wait, and a resume
// starts them.
func TestCircuitBreakerTripSurvivesKill(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	var work atomic.Int64
	var mu sync.Mutex
	pages := map[string]int{} // Idempotency-Key -> deliveries
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/page":
			mu.Lock()
			pages[r.Header.Get("Idempotency-Key")]++
			mu.Unlock()
		case "/work":
			work.Add(1)
			if broken.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprint(w, "{}")
	}))
	defer srv.Close()
	gotPages := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range pages {
			out[k] = v
		}
		return out
	}
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(breakerCrashProject, srv.URL)), 0o644))
	db := storetest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	claim := claimer(t, pool, config)

	p := startRflow(t, db, config, jobs.FaultBeforePage)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); claim(fmt.Sprintf("bad%d", i)) }()
	}
	wg.Wait()
	p.waitKilled(t, 60*time.Second)
	require.Empty(t, gotPages(), "killed before the page's call")
	wf, err := store.GetWorkflow(ctx, pool, "flaky")
	require.NoError(t, err)
	require.True(t, wf.Paused, "the trip committed with the failing run")
	require.Equal(t, "circuit breaker: 3 failed runs in 10m", wf.PausedReason)

	// Claims while it is down and paused wait for the resume.
	broken.Store(false)
	claim("good0")
	claim("good1")

	p = startRflow(t, db, config, "")
	defer p.stop(t)
	require.Eventually(t, func() bool { return len(gotPages()) > 0 }, 30*time.Second, 50*time.Millisecond)
	// Runs started before the trip finish (a pause holds back new runs, not
	// ones under way): their steps may be rescued from the killed process.
	require.Eventually(t, func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs
			WHERE trigger_key LIKE 'bad%' AND status NOT IN ('completed', 'failed', 'cancelled')
			AND EXISTS (SELECT 1 FROM rflow.step_runs s WHERE s.run_id = workflow_runs.id)`).Scan(&open)
		return err == nil && open == 0
	}, 30*time.Second, 50*time.Millisecond, "the runs under way at the trip end")
	before := work.Load()
	time.Sleep(time.Second)
	got := gotPages()
	require.Len(t, got, 1, "one trip, one page: %v", got)
	for key, n := range got {
		require.Equal(t, 1, n, "page %s delivered once", key)
	}
	require.Equal(t, before, work.Load(), "still paused after the restart: nothing starts")

	out, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "ls")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "SINCE")
	require.Contains(t, out, "circuit breaker: 3 failed runs in 10m")
	out, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "ls", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var rows []store.WorkflowRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	require.True(t, rows[0].Paused)
	require.NotNil(t, rows[0].PausedAt)
	require.Equal(t, "circuit breaker: 3 failed runs in 10m", rows[0].PausedReason)

	out, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "resume", "flaky", "-c", config)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "waiting run(s) started")
	require.Eventually(t, func() bool {
		runs, err := store.ListRuns(ctx, pool, store.RunFilter{Workflow: "flaky", Status: store.RunCompleted, Limit: 100})
		require.NoError(t, err)
		return len(runs) >= 2
	}, 30*time.Second, 100*time.Millisecond, "the claims made while paused ran after the resume")
	require.Len(t, gotPages(), 1)
}

// claimer returns a function claiming one manual run of flaky per key
// through the engine's claim gate, from this process.
func claimer(t *testing.T, pool *pgxpool.Pool, config string) func(key string) {
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
	return func(key string) {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := e.ClaimTx(ctx, tx, []store.Claim{{Workflow: "flaky", TriggerKey: key, TriggerKind: "manual", Trigger: []byte(`{}`)}})
			return err
		}))
	}
}
