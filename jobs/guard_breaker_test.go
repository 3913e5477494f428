package jobs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// pager is a loopback service: /work fails with 500 while broken is set,
// /page records the pages it gets.
type pager struct {
	*httptest.Server
	broken atomic.Bool
	work   atomic.Int64
	mu     sync.Mutex
	pages  []recorded
}

func newPager(t *testing.T) *pager {
	p := &pager{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/page":
			p.mu.Lock()
			p.pages = append(p.pages, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
			p.mu.Unlock()
		case "/work":
			p.work.Add(1)
			if p.broken.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *pager) got() []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recorded(nil), p.pages...)
}

const breakerProject = `
name: t
notifiers:
  - { name: pager, webhook: "{{URL}}/page" }
workflows:
  - name: flaky
    trigger: { manual: {} }
    circuit_breaker: { failures: 3, window: %s, notify: pager }
    steps:
      - id: call
        http_call: { method: POST, url: "{{URL}}/work" }
`

func breakerSetup(t *testing.T, window string) (*testBundle, *pager) {
	t.Helper()
	pg := newPager(t)
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	src := strings.ReplaceAll(fmt.Sprintf(breakerProject, window), "{{URL}}", pg.URL)
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	project, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	pool, e := deployed(t, project)
	return &testBundle{pool: pool, engine: e, project: project}, pg
}

// runStates counts the runs of flaky by status; queued runs without a
// journal (claimed while paused, never started) count as "waiting".
func runStates(t *testing.T, b *testBundle) map[string]int {
	t.Helper()
	runs, err := store.ListRuns(context.Background(), b.pool, store.RunFilter{Workflow: "flaky", Limit: 1000})
	require.NoError(t, err)
	out := map[string]int{}
	for _, r := range runs {
		s := string(r.Status)
		if r.Status == store.RunQueued && len(b.steps(t, r.ID)) == 0 {
			s = "waiting"
		}
		out[s]++
	}
	return out
}

func TestCircuitBreakerTripsOncePagesOnceAndResumeStartsWaitingRuns(t *testing.T) {
	t.Parallel()
	b, pg := breakerSetup(t, "10m")
	ctx := context.Background()
	pg.broken.Store(true)

	// Eight failing runs at once: the breaker trips on the third failure
	// and no other transaction trips it again.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.manual(t, "flaky", fmt.Sprintf("bad%d", i), nil)
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		s := runStates(t, b)
		return s["failed"]+s["waiting"] == 8
	}, 30*time.Second, 50*time.Millisecond)
	wf, err := store.GetWorkflow(ctx, b.pool, "flaky")
	require.NoError(t, err)
	require.True(t, wf.Paused)
	require.NotNil(t, wf.PausedAt)
	require.Equal(t, "circuit breaker: 3 failed runs in 10m", wf.PausedReason)

	require.Eventually(t, func() bool { return len(pg.got()) > 0 }, 15*time.Second, 20*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // a second page would have arrived by now
	pages := pg.got()
	require.Len(t, pages, 1, "exactly one page per trip")
	require.NotEmpty(t, pages[0].Header.Get("Idempotency-Key"))
	require.Contains(t, pages[0].Body, `"event":"circuit_breaker.tripped"`)
	require.Contains(t, pages[0].Body, "circuit breaker: 3 failed runs in 10m")
	require.Contains(t, pages[0].Body, pages[0].Header.Get("Idempotency-Key"), "the body names the trip the key is")

	// Claims while paused pass the gate and wait, unstarted.
	pg.broken.Store(false)
	before := pg.work.Load()
	b.manual(t, "flaky", "good0", nil)
	b.manual(t, "flaky", "good1", nil)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, before, pg.work.Load(), "a paused workflow starts nothing")
	waiting := runStates(t, b)["waiting"]
	require.GreaterOrEqual(t, waiting, 2)

	// The resume starts every waiting run; they succeed now, so nothing
	// trips (the failures before the resume no longer count).
	var n int
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		n, err = b.engine.ResumeWorkflowTx(ctx, tx, "flaky")
		return err
	}))
	require.Equal(t, waiting, n)
	require.Eventually(t, func() bool { return runStates(t, b)["completed"] == waiting }, 30*time.Second, 50*time.Millisecond)
	wf, err = store.GetWorkflow(ctx, b.pool, "flaky")
	require.NoError(t, err)
	require.False(t, wf.Paused)
	require.Nil(t, wf.PausedAt)
	require.Empty(t, wf.PausedReason)
	require.Len(t, pg.got(), 1)

	// Failures after the resume count afresh: three more trip it again,
	// with a page of its own (a new trip, a new key).
	pg.broken.Store(true)
	for i := range 3 {
		b.waitRun(t, b.manual(t, "flaky", fmt.Sprintf("again%d", i), nil))
	}
	require.Eventually(t, func() bool { return len(pg.got()) == 2 }, 15*time.Second, 20*time.Millisecond)
	pages = pg.got()
	require.NotEqual(t, pages[0].Header.Get("Idempotency-Key"), pages[1].Header.Get("Idempotency-Key"))
}

func TestCircuitBreakerIgnoresFailuresOutsideTheWindow(t *testing.T) {
	t.Parallel()
	b, pg := breakerSetup(t, "3s")
	ctx := context.Background()
	pg.broken.Store(true)
	b.waitRun(t, b.manual(t, "flaky", "old0", nil))
	b.waitRun(t, b.manual(t, "flaky", "old1", nil))
	time.Sleep(3500 * time.Millisecond)
	b.waitRun(t, b.manual(t, "flaky", "new0", nil))
	b.waitRun(t, b.manual(t, "flaky", "new1", nil))
	wf, err := store.GetWorkflow(ctx, b.pool, "flaky")
	require.NoError(t, err)
	require.False(t, wf.Paused, "two of the four failures are older than the window")
	b.waitRun(t, b.manual(t, "flaky", "new2", nil))
	wf, err = store.GetWorkflow(ctx, b.pool, "flaky")
	require.NoError(t, err)
	require.True(t, wf.Paused, "three failures inside the window")
	require.Equal(t, "circuit breaker: 3 failed runs in 3s", wf.PausedReason)
	require.Eventually(t, func() bool { return len(pg.got()) == 1 }, 15*time.Second, 20*time.Millisecond)
}
