package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/jobs/reorgtest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const reorgRetryOnReorg = `
      - id: undo
        http_call: { method: POST, url: "%[1]s/undo" }
        retry: { max_attempts: 1 }
`

// TestRunsRetryFailedReorgResponse: `rflow runs retry` of a completed run
// whose on_reorg response failed retries that response, and says so (the
// run's own status line alone would read as if nothing happened); under
// -o json stdout stays the run's one JSON document.
func TestRunsRetryFailedReorgResponse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var undos atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/undo" && undos.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(reorgtest.Project("reorgretry", srv.URL, reorgRetryOnReorg)), 0o644))
	project, err := workflow.Load(config, workflow.LoadOptions{})
	require.NoError(t, err)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: dbURL, Project: project, FetchCooldown: time.Millisecond})
	require.NoError(t, err)
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	require.NoError(t, e.Start(ectx))
	defer func() {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		_ = e.Stop(sctx)
	}()
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)

	runID := reorgtest.ClaimAtFork(t, pool, e, 5)
	runStatus := func() store.RunStatus {
		r, err := store.GetRun(ctx, pool, runID, false)
		require.NoError(t, err)
		return r.Status
	}
	require.Eventually(t, func() bool { return runStatus() == store.RunCompleted }, 20*time.Second, 20*time.Millisecond)
	reorgtest.OrphanFork(t, pool, e, 5)
	response := func() *store.Response { return reorgtest.Response(t, pool, runID) }
	require.Eventually(t, func() bool { return response().Status.Terminal() }, 30*time.Second, 20*time.Millisecond)
	failed := response()
	require.Equal(t, store.RunFailed, failed.Status)

	out, errOut, code := rflowCmd(t, "--database-url", dbURL, "runs", "retry", "-c", config, store.ShortID(runID))
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fmt.Sprintf("run %s retried (status completed)\n"+
		"its failed on_reorg response %s (fork at block 5) was retried from its failed step\n", runID, failed.ID), out)
	require.Eventually(t, func() bool { return response().Status == store.RunCompleted }, 30*time.Second, 20*time.Millisecond,
		"the retried response ran to its end")

	// Nothing failed is left: a second retry is refused, and says why.
	_, errOut, code = rflowCmd(t, "--database-url", dbURL, "runs", "retry", "-c", config, "-o", "json", runID.String())
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "only failed runs can be retried")
}
