package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
)

// calls is a loopback endpoint counting requests per path; fail500 makes
// the next request to a path answer 500.
type calls struct {
	*httptest.Server
	mu      sync.Mutex
	n       map[string]int
	fail500 map[string]int
}

func newCalls(t *testing.T) *calls {
	c := &calls{n: map[string]int{}, fail500: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.URL.Path]++
		fail := c.fail500[r.URL.Path] > 0
		if fail {
			c.fail500[r.URL.Path]--
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *calls) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

func flowDef(url, path string) string {
	return fmt.Sprintf(`name: flow
trigger: { manual: {} }
steps:
  - id: wait
    delay: 1s
  - id: call
    http_call: { url: "%s%s", retry: { max_attempts: 1 } }
`, url, path)
}

// TestEndToEndRedeployAndRetry drives a real engine through the API: a
// redeploy bumps the generation while a run is parked, the parked run still
// executes the definition it was claimed under, and a dead-lettered run is
// retried once however often the retry command is repeated.
func TestEndToEndRedeployAndRetry(t *testing.T) {
	t.Parallel()
	c := newCalls(t)
	project := "name: e2e\nworkflows:\n  - " + strings.ReplaceAll(strings.TrimSpace(flowDef(c.URL, "/old")), "\n", "\n    ") + "\n"
	b := newBundle(t, project, true)

	waitStatus := func(id string, want ...string) map[string]any {
		var run map[string]any
		require.Eventually(t, func() bool {
			r := b.api(t, http.MethodGet, "/v1/runs/"+id, "", nil)
			require.Equal(t, http.StatusOK, r.status)
			run = r.json(t)["run"].(map[string]any)
			for _, s := range want {
				if run["status"] == s {
					return true
				}
			}
			return false
		}, 30*time.Second, 50*time.Millisecond, "run %s never reached %v", id, want)
		return run
	}

	r := b.api(t, http.MethodPost, "/v1/workflows/flow/runs", "start-a", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	runA := r.json(t)["run_id"].(string)
	waitStatus(runA, "waiting_delay")

	r = b.api(t, http.MethodPut, "/v1/workflows/flow", "deploy-2", []byte(flowDef(c.URL, "/new")))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, float64(2), r.json(t)["generation"])

	a := waitStatus(runA, "completed", "failed", "cancelled")
	require.Equal(t, "completed", a["status"])
	require.Equal(t, float64(1), a["generation"])
	require.Equal(t, 1, c.count("/old"), "the parked run kept the definition it was claimed under")
	require.Zero(t, c.count("/new"))

	// Generation 2 runs the new definition; its call fails once and the run
	// is dead-lettered.
	c.mu.Lock()
	c.fail500["/new"] = 1
	c.mu.Unlock()
	r = b.api(t, http.MethodPost, "/v1/workflows/flow/runs", "start-b", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	runB := r.json(t)["run_id"].(string)
	require.Equal(t, "failed", waitStatus(runB, "completed", "failed", "cancelled")["status"])
	require.Equal(t, 1, c.count("/new"))

	retries := concurrently(10, func() reply {
		return b.api(t, http.MethodPost, "/v1/runs/"+runB+"/retry", "retry-b", nil)
	})
	for _, r := range retries {
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.Equal(t, retries[0].body, r.body)
	}
	require.Equal(t, float64(2), retries[0].json(t)["run"].(map[string]any)["attempt"], "one retry, whatever the repeats")
	require.Equal(t, "completed", waitStatus(runB, "completed", "failed", "cancelled")["status"])
	require.Equal(t, 2, c.count("/new"))
	require.Equal(t, 1, c.count("/old"))

	r = b.api(t, http.MethodPost, "/v1/runs/"+runB+"/retry", "retry-b-again", nil)
	require.Equal(t, http.StatusConflict, r.status, "a completed run is not retried: %s", r.body)
}

// dyingEngine kills its own database session in the middle of the next
// StartRunTx, after the run and its job were written but before commit: what
// a process crash at the worst moment looks like to Postgres.
type dyingEngine struct {
	*jobs.Engine
	die atomic.Bool
}

func (e *dyingEngine) StartRunTx(ctx context.Context, tx pgx.Tx, c store.Claim) (uuid.UUID, bool, error) {
	id, created, err := e.Engine.StartRunTx(ctx, tx, c)
	if err == nil && e.die.CompareAndSwap(true, false) {
		_, err = tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
		if err == nil {
			err = errors.New("session survived pg_terminate_backend")
		}
	}
	return id, created, err
}

// TestCrashBeforeCommitLeavesNothing: a command whose session dies before
// commit leaves no run, no job and no ledger entry, and its retry with the
// same Idempotency-Key makes exactly one run.
func TestCrashBeforeCommitLeavesNothing(t *testing.T) {
	t.Parallel()
	var dying *dyingEngine
	b := newBundle(t, projectYAML, false, func(c *server.Config) {
		dying = &dyingEngine{Engine: c.Engine.(*jobs.Engine)}
		dying.die.Store(true)
		c.Engine = dying
	})
	body := []byte(`{"input": 1}`)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "crash-1", body)
	require.Equal(t, http.StatusInternalServerError, r.status, "%s", r.body)
	require.Equal(t, "internal", r.errorCode(t))
	require.False(t, dying.die.Load(), "the session was killed")
	require.Zero(t, b.runs(t))
	require.Zero(t, b.ledger(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM river.river_job`))

	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "crash-1", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Empty(t, r.header.Get(server.HeaderReplayed), "nothing was recorded to replay")
	again := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "crash-1", body)
	require.Equal(t, r.body, again.body)
	require.Equal(t, 1, b.runs(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river.river_job`))
}
