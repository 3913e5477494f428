package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// gate is a loopback endpoint counting requests per path. The first
// request to a path it holds waits until released (or for a given time);
// every other answers at once.
type gate struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	hold    map[string]chan struct{}
	sleep   map[string]time.Duration
	arrived chan string
}

func newGate(t *testing.T, held ...string) *gate {
	g := &gate{hits: map[string]int{}, hold: map[string]chan struct{}{}, sleep: map[string]time.Duration{}, arrived: make(chan string, 16)}
	for _, p := range held {
		g.hold[p] = make(chan struct{})
	}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.hits[r.URL.Path]++
		first := g.hits[r.URL.Path] == 1
		wait, sleep := g.hold[r.URL.Path], g.sleep[r.URL.Path]
		g.mu.Unlock()
		if first && wait != nil {
			g.arrived <- r.URL.Path
			select {
			case <-wait:
			case <-r.Context().Done():
				return
			}
		}
		if sleep > 0 {
			time.Sleep(sleep)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(g.Close)
	t.Cleanup(g.releaseAll)
	return g
}

func (g *gate) count(path string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hits[path]
}

// waitHeld waits for the held first request to path.
func (g *gate) waitHeld(t *testing.T, path string) {
	t.Helper()
	select {
	case p := <-g.arrived:
		require.Equal(t, path, p)
	case <-time.After(30 * time.Second):
		t.Fatalf("no request to %s arrived", path)
	}
}

func (g *gate) release(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.hold[path]; c != nil {
		close(c)
		g.hold[path] = nil
	}
}

func (g *gate) releaseAll() {
	g.mu.Lock()
	paths := make([]string, 0, len(g.hold))
	for p := range g.hold {
		paths = append(paths, p)
	}
	g.mu.Unlock()
	for _, p := range paths {
		g.release(p)
	}
}

const carryChain = `
name: t
workflows:
  - name: chain
    trigger: { manual: {} }
    steps:
      - { id: a, http_call: { method: POST, url: "{{URL}}/a" } }
      - { id: b, http_call: { method: POST, url: "{{URL}}/b" } }
      - { id: c, http_call: { method: POST, url: "{{URL}}/c" } }
  - name: mixed
    trigger: { manual: {} }
    steps:
      - { id: a, http_call: { method: POST, url: "{{URL}}/a" } }
      - { id: skip, if: "${{ false }}", http_call: { url: "{{URL}}/never" } }
      - { id: b, http_call: { method: POST, url: "{{URL}}/b" } }
      - { id: nap, delay: 10ms }
      - { id: c, http_call: { method: POST, url: "{{URL}}/c" } }
`

// carryBundle deploys yaml ({{URL}} the gate's URL) on a fresh database
// and starts an engine on cfg (its Pool, URL and Project filled in).
func carryBundle(t *testing.T, yaml string, g *gate, cfg jobs.Config) (*testBundle, jobs.Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "{{URL}}", g.URL)), 0o644))
	project, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool, cfg.URL, cfg.Project, cfg.FetchCooldown = pool, url, project, time.Millisecond
	e := startEngineWith(t, cfg)
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &testBundle{pool: pool, engine: e, project: project}, cfg
}

// stepJobs returns the River step jobs of run id, oldest first.
func stepJobs(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM river.river_job
		WHERE args @> jsonb_build_object('run_id', $1::text) OR args ? $1::text ORDER BY id`, id.String())
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func carrierOf(t *testing.T, s *store.StepRun) int64 {
	t.Helper()
	require.NotNil(t, s.CarrierJob, "step %s was not carried", s.Key)
	return *s.CarrierJob
}

// TestCarriedRunNeedsOneJob: the job of a run's first step carries the
// http_call steps after it (a skipped step between is evaluated inline);
// a delay is not carried (it parks) and gets a job of its own, which then
// carries the step after it. Each step still reaches its endpoint once.
func TestCarriedRunNeedsOneJob(t *testing.T) {
	t.Parallel()
	g := newGate(t)
	b, _ := carryBundle(t, carryChain, g, jobs.Config{})

	id := b.manual(t, "chain", "r1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	steps := b.steps(t, id)
	js := stepJobs(t, b.pool, id)
	require.Len(t, js, 1, "one River job for the whole run")
	require.Nil(t, steps["a"].CarrierJob)
	require.Equal(t, js[0], carrierOf(t, steps["b"]))
	require.Equal(t, js[0], carrierOf(t, steps["c"]))

	id = b.manual(t, "mixed", "r2", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	steps = b.steps(t, id)
	js = stepJobs(t, b.pool, id)
	require.Len(t, js, 2, "the first step's job and the delay's")
	require.Equal(t, store.StepSkipped, steps["skip"].Status)
	require.Equal(t, js[0], carrierOf(t, steps["b"]))
	require.Nil(t, steps["nap"].CarrierJob, "a delay parks: a job of its own")
	require.Equal(t, js[1], carrierOf(t, steps["c"]), "the delay's job carries the step after it")
	for _, p := range []string{"/a", "/b", "/c"} {
		require.Equal(t, 2, g.count(p), p)
	}
	require.Zero(t, g.count("/never"))

	// The console's links: a carried step links its carrier.
	links, err := store.StepJobs(context.Background(), b.pool, id)
	require.NoError(t, err)
	require.Equal(t, js[1], links["c"])
	require.Equal(t, js[0], links["b"])
}

// TestCarryCapHandsOver: a job carries at most InlineCap steps after its
// own; the next one gets a job of its own (which carries on).
func TestCarryCapHandsOver(t *testing.T) {
	t.Parallel()
	g := newGate(t)
	b, _ := carryBundle(t, carryChain, g, jobs.Config{InlineCap: 1})
	id := b.manual(t, "chain", "r1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	steps := b.steps(t, id)
	js := stepJobs(t, b.pool, id)
	require.Len(t, js, 2)
	require.Equal(t, js[0], carrierOf(t, steps["b"]))
	require.Nil(t, steps["c"].CarrierJob, "past the cap: a job of its own")

	// Switched off, every step has its own job.
	g2 := newGate(t)
	off, _ := carryBundle(t, carryChain, g2, jobs.Config{NoInline: true})
	id = off.manual(t, "chain", "r1", nil)
	require.Equal(t, store.RunCompleted, off.waitRun(t, id).Status)
	require.Len(t, stepJobs(t, off.pool, id), 3)
	for _, s := range off.steps(t, id) {
		require.Nil(t, s.CarrierJob, s.Key)
	}
}

// TestRescuedCarrierResumesCarriedStep: the job carrying step b is made
// available again while b's request is in flight, as the dead-node rescue
// does for a process that died (store.RescueDeadNodes). Its second run
// finds its own step a settled, finds b carried by it, and performs b; the
// first run's settle of b is then fenced off. b's effect is in the window
// a crash leaves (two requests); c, after b's outcome, is made once.
func TestRescuedCarrierResumesCarriedStep(t *testing.T) {
	t.Parallel()
	g := newGate(t, "/b")
	b, _ := carryBundle(t, carryChain, g, jobs.Config{})
	id := b.manual(t, "chain", "r1", nil)
	g.waitHeld(t, "/b")
	steps := b.steps(t, id)
	require.Equal(t, store.StepQueued, steps["b"].Status)
	carrier := carrierOf(t, steps["b"])
	require.Len(t, stepJobs(t, b.pool, id), 1, "b has no job of its own: only its carrier")

	staleBefore := b.engine.Stale.Load()
	_, err := b.pool.Exec(context.Background(), `UPDATE river.river_job SET state = 'available' WHERE id = $1 AND state = 'running'`, carrier)
	require.NoError(t, err)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status, "the rescued carrier ran b and carried c")
	require.Equal(t, 2, g.count("/b"), "the rescued carrier made b's request again (the first is still in flight)")
	require.Equal(t, 1, g.count("/c"))

	g.release("/b")
	require.Eventually(t, func() bool { return b.engine.Stale.Load() > staleBefore }, 10*time.Second, 20*time.Millisecond,
		"the first run's settle of b was fenced off")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, g.count("/c"), "c once")
	steps = b.steps(t, id)
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, store.StepCompleted, steps[k].Status, k)
		require.Equal(t, 1, steps[k].Attempt, k)
	}
	require.Len(t, stepJobs(t, b.pool, id), 1)
}

// TestCarrierRetryContinuesCarriedStep: when Postgres refuses a carried
// step's outcome and then its record as a failed attempt too (a trigger
// that fails b's first two settles), the carrier's Work returns the error
// and River retries the carrier; the retry finds its own step settled and
// goes on with b, which it carried, and c after it.
func TestCarrierRetryContinuesCarriedStep(t *testing.T) {
	t.Parallel()
	g := newGate(t)
	b, _ := carryBundle(t, carryChain, g, jobs.Config{})
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `
		CREATE SEQUENCE public.refuse_b;
		CREATE FUNCTION public.refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.step_key = 'b' AND NEW.status IN ('completed', 'failed') AND nextval('public.refuse_b') <= 2 THEN
				RAISE EXCEPTION 'refused by the test';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_b BEFORE UPDATE ON rflow.step_runs FOR EACH ROW EXECUTE FUNCTION public.refuse_b();`)
	require.NoError(t, err)

	id := b.manual(t, "chain", "r1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	steps := b.steps(t, id)
	js := stepJobs(t, b.pool, id)
	require.Len(t, js, 1, "no job but the carrier")
	require.Equal(t, js[0], carrierOf(t, steps["b"]))
	require.Equal(t, js[0], carrierOf(t, steps["c"]))
	require.Equal(t, 1, steps["b"].Attempt, "the refused settles never reached the journal")
	require.Equal(t, 2, g.count("/b"), "the carrier's retry made b again (the crash window: effect, no outcome)")
	require.Equal(t, 1, g.count("/c"))
	var attempt int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT attempt FROM river.river_job WHERE id = $1`, js[0]).Scan(&attempt))
	require.Equal(t, 2, attempt, "River retried the carrier once")
}

// TestStopHandsCarriedStepOver: a graceful stop while a carried step is in
// flight lets it settle, and the step after it gets a River job of its own
// instead of being carried: after the stop the run waits at c with a job
// that a next process works.
func TestStopHandsCarriedStepOver(t *testing.T) {
	t.Parallel()
	g := newGate(t, "/b")
	b, cfg := carryBundle(t, carryChain, g, jobs.Config{})
	id := b.manual(t, "chain", "r1", nil)
	g.waitHeld(t, "/b")
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- b.engine.Stop(ctx)
	}()
	time.Sleep(200 * time.Millisecond) // Stop has begun: it waits for b
	g.release("/b")
	require.NoError(t, <-stopped)

	steps := b.steps(t, id)
	require.Equal(t, store.StepCompleted, steps["b"].Status, "b reached its outcome before the stop")
	require.Equal(t, store.StepQueued, steps["c"].Status)
	require.Nil(t, steps["c"].CarrierJob, "not carried past a stop")
	require.Len(t, stepJobs(t, b.pool, id), 2, "c has a job of its own")
	require.Zero(t, g.count("/c"))

	startEngineWith(t, cfg) // the next process
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	require.Equal(t, 1, g.count("/c"))
}

// TestCancelWhileCarried: a run cancelled while a carried step's request is
// in flight stops there: the step's settle is fenced off and the step
// after it is never requested.
func TestCancelWhileCarried(t *testing.T) {
	t.Parallel()
	g := newGate(t, "/b")
	b, _ := carryBundle(t, carryChain, g, jobs.Config{})
	id := b.manual(t, "chain", "r1", nil)
	g.waitHeld(t, "/b")
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.engine.CancelRunTx(ctx, tx, id)
		return err
	}))
	staleBefore := b.engine.Stale.Load()
	g.release("/b")
	require.Eventually(t, func() bool { return b.engine.Stale.Load() > staleBefore }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	run, err := store.GetRun(ctx, b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, run.Status)
	steps := b.steps(t, id)
	require.Equal(t, store.StepCancelled, steps["b"].Status)
	require.Nil(t, steps["c"], "c never journaled")
	require.Zero(t, g.count("/c"))
}

const carryTimeouts = `
name: t
workflows:
  - name: tight
    trigger: { manual: {} }
    steps:
      - { id: a, http_call: { method: POST, url: "{{URL}}/a", timeout: 1s } }
      - { id: b, http_call: { method: POST, url: "{{URL}}/b", timeout: 4s } }
      - { id: c, http_call: { method: POST, url: "{{URL}}/c", timeout: 100ms } }
`

// TestCarriedStepTimeouts: River's deadline for a job that may carry is
// the rescue delay less a job timeout (5 s here: RescueAfter is raised to
// the longest step job, 4 s + 1 s, plus 1 s). After a, what is left of it
// does not cover b's own job timeout (5 s): b gets a job of its own. b's
// request takes 1.5 s, longer than River's job timeout of 1 s, and
// completes at its first attempt: a step runs under its own step's
// timeout. Then c's own job timeout (1.1 s) fits: b's job carries it.
func TestCarriedStepTimeouts(t *testing.T) {
	t.Parallel()
	g := newGate(t)
	g.sleep["/b"] = 1500 * time.Millisecond
	b, _ := carryBundle(t, carryTimeouts, g, jobs.Config{JobTimeout: time.Second, RescueAfter: time.Second})
	id := b.manual(t, "tight", "r1", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	steps := b.steps(t, id)
	js := stepJobs(t, b.pool, id)
	require.Len(t, js, 2)
	require.Nil(t, steps["b"].CarrierJob, "River's deadline would not cover b's timeout: a job of its own")
	require.Equal(t, js[1], carrierOf(t, steps["c"]))
	require.Equal(t, 1, steps["b"].Attempt)
	require.Equal(t, 1, g.count("/b"), "b was not cut off by River's job timeout")
	require.Equal(t, 1, g.count("/c"))
}

// TestOrphanedRunHoldsItsCarriedStep: a run whose log leaves the canonical
// chain while a step is in flight (orphaned, its reorg response pending)
// stops at the next step boundary even when the job would carry that
// step: the settle's run update reports the orphaning, and the carried
// step is held (no request, no job) as a job of its own would be.
func TestOrphanedRunHoldsItsCarriedStep(t *testing.T) {
	t.Parallel()
	g := newGate(t, "/a")
	b, _ := carryBundle(t, carryChain, g, jobs.Config{})
	ctx := context.Background()
	id := b.manual(t, "chain", "r1", nil)
	g.waitHeld(t, "/a")
	_, err := b.pool.Exec(ctx, `UPDATE rflow.workflow_runs SET orphaned_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO rflow.reorg_runs (id, run_id, fork_block, chain_id, depth, decide_at)
		VALUES ($1, $2, 1, 31337, 1, 1000000)`, uuid.New(), id)
	require.NoError(t, err)
	g.release("/a")

	require.Eventually(t, func() bool {
		var held bool
		err := b.pool.QueryRow(ctx, `SELECT held_at IS NOT NULL FROM rflow.step_runs WHERE run_id = $1 AND step_key = 'b'`, id).Scan(&held)
		return err == nil && held
	}, 10*time.Second, 20*time.Millisecond, "b held at its boundary")
	js := stepJobs(t, b.pool, id)
	require.Len(t, js, 1)
	require.Eventually(t, func() bool {
		var state string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT state FROM river.river_job WHERE id = $1`, js[0]).Scan(&state))
		return state == "completed"
	}, 10*time.Second, 20*time.Millisecond, "the carrier completed with the hold")
	time.Sleep(200 * time.Millisecond)
	require.Zero(t, g.count("/b"), "nothing after the boundary ran")
	steps := b.steps(t, id)
	require.Equal(t, store.StepCompleted, steps["a"].Status)
	require.Equal(t, store.StepQueued, steps["b"].Status)
	require.Nil(t, steps["c"])
}

// TestOlderProcessStopsCarrying: while a process of an older version
// (registered without knows_carriers) shares the database, no step is
// carried, since its repair scan would enqueue a carried step a second
// time; once it is gone, carrying resumes within a second.
func TestOlderProcessStopsCarrying(t *testing.T) {
	t.Parallel()
	g := newGate(t)
	b, _ := carryBundle(t, carryChain, g, jobs.Config{NodeGrace: time.Minute})
	ctx := context.Background()

	id := b.manual(t, "chain", "before", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	require.Len(t, stepJobs(t, b.pool, id), 1, "carried while every process knows carriers")

	// An older process registers as it did before migration 046: the
	// column keeps its default. It is alive (this test's own pid and host).
	var host string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT host_identity FROM rflow.nodes LIMIT 1`).Scan(&host))
	_, err := b.pool.Exec(ctx, `INSERT INTO rflow.nodes (id, client_id, hostname, pid, host_identity, project, triggers)
		VALUES (nextval('rflow.nodes_id_seq'), 'older', 'older', $1, $2, 't', true)`, os.Getpid(), host)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // a liveness round

	id = b.manual(t, "chain", "during", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	steps := b.steps(t, id)
	require.Len(t, stepJobs(t, b.pool, id), 3, "a job per step while an older process runs")
	for _, k := range []string{"a", "b", "c"} {
		require.Nil(t, steps[k].CarrierJob, k)
	}

	_, err = b.pool.Exec(ctx, `DELETE FROM rflow.nodes WHERE client_id = 'older'`)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	id = b.manual(t, "chain", "after", nil)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	require.Len(t, stepJobs(t, b.pool, id), 1, "carried again once the older process is gone")
	for _, p := range []string{"/a", "/b", "/c"} {
		require.Equal(t, 3, g.count(p), p)
	}
}
