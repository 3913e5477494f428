package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const slowStep = `
name: t
workflows:
  - name: slow
    trigger: { manual: {} }
    steps:
      - id: call
        http_call: { url: "{{URL}}", timeout: {{TIMEOUT}}{{RETRY}} }
      - id: after
        noop: {}
`

// slowBundle runs an engine whose River job timeout is 2 s against an
// endpoint that answers after delay, counting the requests it receives.
func slowBundle(t *testing.T, delay time.Duration, stepTimeout, retry string) (*testBundle, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(srv.Close)
	src := strings.NewReplacer("{{URL}}", srv.URL, "{{TIMEOUT}}", stepTimeout, "{{RETRY}}", retry).Replace(slowStep)
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	project, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond,
		JobTimeout: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = e.Stop(sctx)
		cancel()
	})
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	return &testBundle{pool: pool, engine: e, project: project}, &hits
}

// TestStepLongerThanJobTimeout: a step whose own timeout (4 s) exceeds
// River's job timeout (2 s) and whose endpoint answers after 3 s completes
// at its first delivery: River gives the job the step's timeout plus its
// own, instead of cancelling it and re-firing it forever.
func TestStepLongerThanJobTimeout(t *testing.T) {
	t.Parallel()
	b, hits := slowBundle(t, 3*time.Second, "4s", "")
	run := b.waitRun(t, b.manual(t, "slow", "r1", nil))
	require.Equal(t, store.RunCompleted, run.Status)
	steps := b.steps(t, run.ID)
	require.Equal(t, store.StepCompleted, steps["call"].Status)
	require.Equal(t, 1, steps["call"].Attempt)
	require.Equal(t, store.StepCompleted, steps["after"].Status)
	time.Sleep(time.Second) // a stray re-fire would arrive by now
	require.EqualValues(t, 1, hits.Load(), "delivered once")
}

// TestStepThatKeepsTimingOutFailsTheRun: a step whose own timeout keeps
// expiring is retried by its retry policy only, then fails the run (the
// dead letter queue) with an error that says the timeout expired.
func TestStepThatKeepsTimingOutFailsTheRun(t *testing.T) {
	t.Parallel()
	b, hits := slowBundle(t, time.Minute, "3s", ", retry: { max_attempts: 2, backoff: fixed, delay: 10ms }")
	run := b.waitRun(t, b.manual(t, "slow", "r1", nil))
	require.Equal(t, store.RunFailed, run.Status)
	require.Equal(t, "call", *run.FailedStep)
	call := b.steps(t, run.ID)["call"]
	require.Equal(t, store.StepFailed, call.Status)
	require.Equal(t, 2, call.Attempt, "the retry policy's two attempts, no more")
	require.Contains(t, *call.Error, "no response within the step's timeout of 3s")
	require.EqualValues(t, 2, hits.Load())
}
