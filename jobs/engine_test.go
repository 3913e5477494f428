package jobs_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/signature"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// receiver is a loopback HTTP endpoint that records every request and
// answers with a status chosen per path (default 200 with a JSON echo).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
	status   map[string][]int // path -> statuses to answer in turn
}

type recorded struct {
	Path    string
	Header  http.Header
	Body    string
	Arrived time.Time
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: map[string][]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, recorded{Path: req.URL.Path, Header: req.Header.Clone(), Body: string(body), Arrived: time.Now()})
		code := http.StatusOK
		if q := r.status[req.URL.Path]; len(q) > 0 {
			code, r.status[req.URL.Path] = q[0], q[1:]
		}
		n := len(r.requests)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"n": %d, "path": %q, "big": 115792089237316195423570985008687907853269984665640564039457584007913129639935, "tier": "gold", "wallets": ["a", "b", "c"]}`, n, req.URL.Path)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got(path string) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recorded
	for _, q := range r.requests {
		if q.Path == path {
			out = append(out, q)
		}
	}
	return out
}

type testBundle struct {
	pool    *pgxpool.Pool
	engine  *jobs.Engine
	project *workflow.Project
	recv    *receiver
}

// setup loads a project from yaml ({{URL}} becomes the receiver's URL),
// deploys it on a fresh database and starts an engine.
func setup(t *testing.T, projectYAML string) *testBundle {
	t.Helper()
	return setupWith(t, projectYAML, jobs.Config{})
}

// setupWith is setup with an engine configured by cfg (its Pool, URL and
// Project filled in).
func setupWith(t *testing.T, projectYAML string, cfg jobs.Config) *testBundle {
	t.Helper()
	recv := newReceiver(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(projectYAML, "{{URL}}", recv.URL)), 0o644))
	project, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool, cfg.URL, cfg.Project = pool, url, project
	cfg.FetchCooldown = cmp.Or(cfg.FetchCooldown, time.Millisecond)
	e := startEngineWith(t, cfg)
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &testBundle{pool: pool, engine: e, project: project, recv: recv}
}

// deployed starts an engine for project on a fresh database and deploys
// the project's workflows.
func deployed(t testing.TB, project *workflow.Project) (*pgxpool.Pool, *jobs.Engine) {
	t.Helper()
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngine(t, pool, url, project)
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return pool, e
}

func startEngine(t testing.TB, pool *pgxpool.Pool, url string, project *workflow.Project) *jobs.Engine {
	t.Helper()
	return startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond})
}

// startEngineWith starts an engine on cfg, with the relayer's backends
// dialled from the project the way rflow start does.
func startEngineWith(t testing.TB, cfg jobs.Config) *jobs.Engine {
	t.Helper()
	backends, release, err := jobs.DialBackends(context.Background(), cfg.Project, nil)
	require.NoError(t, err)
	t.Cleanup(release)
	cfg.Backends = backends
	e, err := jobs.NewEngine(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = e.Stop(sctx)
		cancel()
	})
	return e
}

func (b *testBundle) manual(t *testing.T, wf, key string, input any) uuid.UUID {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"input": input})
	var id uuid.UUID
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		id, _, err = b.engine.StartRunTx(context.Background(), tx, store.Claim{Workflow: wf, TriggerKey: key, TriggerKind: "manual", Trigger: payload})
		return err
	}))
	return id
}

// waitRun waits until the run reaches a terminal status and returns it.
func (b *testBundle) waitRun(t *testing.T, id uuid.UUID) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = store.GetRun(context.Background(), b.pool, id, false)
		require.NoError(t, err)
		return run.Status.Terminal()
	}, 30*time.Second, 20*time.Millisecond, "run %s never finished", id)
	return run
}

func (b *testBundle) steps(t *testing.T, id uuid.UUID) map[string]*store.StepRun {
	t.Helper()
	steps, err := store.RunSteps(context.Background(), b.pool, id)
	require.NoError(t, err)
	out := map[string]*store.StepRun{}
	for _, s := range steps {
		out[s.Key] = s
	}
	return out
}

const threeSteps = `
name: t
workflows:
  - name: three
    trigger: { manual: {} }
    steps:
      - id: a
        http_call: { method: POST, url: "{{URL}}/a", body: { n: 1 } }
      - id: b
        http_call: { method: POST, url: "{{URL}}/b", body: "${{ steps.a.output.body.big }}" }
      - id: c
        http_call: { method: GET, url: "{{URL}}/c?tier=${{ steps.a.output.body.tier }}", hmac_secret: s3cret }
`

func TestThreeStepRunJournalsEveryStep(t *testing.T) {
	t.Parallel()
	b := setup(t, threeSteps)
	id := b.manual(t, "three", "k1", nil)
	run := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, run.Status)

	steps := b.steps(t, id)
	require.Len(t, steps, 3)
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, store.StepCompleted, steps[k].Status, k)
		require.Equal(t, 1, steps[k].Attempt)
		require.Len(t, b.recv.got("/"+k), 1, "step %s called once", k)
	}
	// The uint256 from step a's response reaches step b exactly (beyond
	// 2^53-1, a request body writes it as a decimal string).
	require.Equal(t, `"115792089237316195423570985008687907853269984665640564039457584007913129639935"`, b.recv.got("/b")[0].Body)
	// Headers of the reference: idempotency key, run/step ids, signature.
	c := b.recv.got("/c")[0]
	require.Equal(t, id.String()+":c", c.Header.Get("Idempotency-Key"))
	require.Equal(t, id.String(), c.Header.Get("X-Rflow-Run-Id"))
	require.Equal(t, "c", c.Header.Get("X-Rflow-Step"))
	require.Equal(t, signature.Sign("s3cret", c.Header.Get(signature.HeaderTimestamp), nil), c.Header.Get(signature.HeaderSignature))

	// The claim gate: the same key never makes a second run.
	again := b.manual(t, "three", "k1", nil)
	require.Equal(t, id, again)
	time.Sleep(200 * time.Millisecond)
	require.Len(t, b.recv.got("/a"), 1)
}

const controlFlow = `
name: t
workflows:
  - name: flow
    trigger: { manual: {} }
    steps:
      - id: first
        http_call: { url: "{{URL}}/first" }
      - id: skipped
        if: "${{ steps.first.output.body.tier == 'silver' }}"
        http_call: { url: "{{URL}}/never" }
      - id: each
        foreach: "${{ steps.first.output.body.wallets }}"
        concurrency: 2
        steps:
          - id: ping
            http_call: { method: POST, url: "{{URL}}/ping/${{ item }}", body: { i: "${{ index }}" } }
      - id: boom
        if: "${{ trigger.input.fail == true }}"
        fail: "asked to fail after ${{ len(steps.each.output) }} items"
      - id: last
        http_call: { url: "{{URL}}/last" }
    finally:
      - id: audit
        http_call: { method: POST, url: "{{URL}}/audit" }
`

func TestControlFlowForeachIfFailFinallyRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, controlFlow)

	ok := b.waitRun(t, b.manual(t, "flow", "ok", map[string]any{"fail": false}))
	require.Equal(t, store.RunCompleted, ok.Status)
	steps := b.steps(t, ok.ID)
	require.Equal(t, store.StepSkipped, steps["skipped"].Status)
	require.Empty(t, b.recv.got("/never"))
	for i, w := range []string{"a", "b", "c"} {
		key := fmt.Sprintf("ping[%d]", i)
		require.Equal(t, store.StepCompleted, steps[key].Status, key)
		require.Len(t, b.recv.got("/ping/"+w), 1)
	}
	var results []map[string]any
	require.NoError(t, json.Unmarshal(steps["each"].Output, &results))
	require.Len(t, results, 3, "foreach output collects every item in order")
	for i, w := range []string{"a", "b", "c"} {
		require.Equal(t, "/ping/"+w, results[i]["body"].(map[string]any)["path"])
	}
	require.Equal(t, store.StepCompleted, steps["audit"].Status)

	// fail: the run is dead-lettered with its journal, finally still runs.
	failed := b.waitRun(t, b.manual(t, "flow", "bad", map[string]any{"fail": true}))
	require.Equal(t, store.RunFailed, failed.Status)
	require.Contains(t, *failed.Error, "asked to fail after 3 items")
	require.Equal(t, "boom", *failed.FailedStep)
	fsteps := b.steps(t, failed.ID)
	require.Equal(t, store.StepFailed, fsteps["boom"].Status)
	require.Equal(t, store.StepCompleted, fsteps["audit"].Status)
	require.Nil(t, fsteps["last"])
}

const retrying = `
name: t
workflows:
  - name: flaky
    trigger: { manual: {} }
    steps:
      - id: once
        http_call: { url: "{{URL}}/once" }
      - id: flaky
        http_call:
          url: "{{URL}}/flaky"
          retry: { max_attempts: 3, backoff: fixed, delay: 10ms }
      - id: after
        http_call: { url: "{{URL}}/after" }
`

func TestRetryPolicyAndDeadLetterRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, retrying)
	// Two 503s then success: attempts 1 and 2 fail, 3 completes.
	b.recv.mu.Lock()
	b.recv.status["/flaky"] = []int{503, 503}
	b.recv.mu.Unlock()
	run := b.waitRun(t, b.manual(t, "flaky", "r1", nil))
	require.Equal(t, store.RunCompleted, run.Status)
	require.Equal(t, 3, b.steps(t, run.ID)["flaky"].Attempt)
	require.Len(t, b.recv.got("/flaky"), 3)

	// Exhausted: three 500s dead-letter the run; an operator retry resumes
	// at the failed step and never re-runs the completed one.
	b.recv.mu.Lock()
	b.recv.status["/flaky"] = []int{500, 500, 500}
	b.recv.mu.Unlock()
	dead := b.waitRun(t, b.manual(t, "flaky", "r2", nil))
	require.Equal(t, store.RunFailed, dead.Status)
	require.Equal(t, "flaky", *dead.FailedStep)
	require.Len(t, b.recv.got("/once"), 2)

	var retried *store.Run
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		retried, err = b.engine.RetryRunTx(context.Background(), tx, dead.ID)
		return err
	}))
	require.Equal(t, 2, retried.Attempt)
	done := b.waitRun(t, dead.ID)
	require.Equal(t, store.RunCompleted, done.Status)
	require.Len(t, b.recv.got("/once"), 2, "the completed step is not re-run")
	steps := b.steps(t, dead.ID)
	require.Equal(t, 4, steps["flaky"].Attempt)
	require.Equal(t, store.StepCompleted, steps["after"].Status)
}

const delayed = `
name: t
workflows:
  - name: later
    trigger: { manual: {} }
    steps:
      - id: wait
        delay: 1s
      - id: ping
        http_call: { url: "{{URL}}/ping" }
`

func TestDelayParksWithPersistedWakeTime(t *testing.T) {
	t.Parallel()
	b := setup(t, delayed)
	start := time.Now()
	id := b.manual(t, "later", "d1", nil)
	run, err := store.GetRun(context.Background(), b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingDelay, run.Status)
	require.NotNil(t, run.WakeAt)
	require.WithinDuration(t, start.Add(time.Second), *run.WakeAt, 500*time.Millisecond)
	done := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, done.Status)
	require.GreaterOrEqual(t, b.recv.got("/ping")[0].Arrived.Sub(*run.WakeAt), time.Duration(0), "woke no earlier than the persisted time")
}

const looping = `
name: t
workflows:
  - name: loop
    trigger: { manual: {} }
    steps:
      - id: ping
        http_call: { url: "{{URL}}/loop" }
      - id: again
        goto: ping
`

func TestGotoLoopGuard(t *testing.T) {
	t.Parallel()
	b := setup(t, looping)
	run := b.waitRun(t, b.manual(t, "loop", "g", nil))
	require.Equal(t, store.RunFailed, run.Status)
	require.Contains(t, *run.Error, "loop guard")
	require.Len(t, b.recv.got("/loop"), 101, "each visit is its own journaled step, until the guard")
}

const notifying = `
name: t
workflows:
  - name: tell
    trigger: { manual: {} }
    steps:
      - id: s
        notify: { slack: "{{URL}}/slack", text: "deposit ${{ trigger.key }}" }
      - id: d
        notify: { discord: "{{URL}}/discord", text: "run ${{ run.id }}" }
      - id: w
        notify: { webhook: "{{URL}}/hook", text: "plain" }
      - id: until
        delay: { until: "${{ trigger.input.at }}" }
`

func TestNotifyFormatsAndDelayUntil(t *testing.T) {
	t.Parallel()
	b := setup(t, notifying)
	at := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	id := b.manual(t, "tell", "n1", map[string]any{"at": at.Format(time.RFC3339Nano)})
	run := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, run.Status)
	require.JSONEq(t, `{"text": "deposit n1"}`, b.recv.got("/slack")[0].Body)
	require.JSONEq(t, fmt.Sprintf(`{"content": "run %s"}`, id), b.recv.got("/discord")[0].Body)
	var hook map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.recv.got("/hook")[0].Body), &hook))
	require.Equal(t, "plain", hook["text"])
	require.Equal(t, id.String(), hook["run_id"])
	require.Equal(t, id.String()+":w", b.recv.got("/hook")[0].Header.Get("Idempotency-Key"))
	steps := b.steps(t, id)
	require.NotNil(t, steps["until"].WakeAt)
	require.WithinDuration(t, at, *steps["until"].WakeAt, time.Millisecond)
	require.False(t, steps["until"].FinishedAt.Before(at), "delay finished before its until time")
}

// TestUnknownJobKindIsLeftForAProcessThatKnowsIt: a job of a kind this
// version has no worker for (a newer version's, in a rolling upgrade) is
// never fetched, so it spends no attempt and stays available, while the
// engine works its own jobs in the same queue.
func TestUnknownJobKindIsLeftForAProcessThatKnowsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, threeSteps)
	var future int64
	require.NoError(t, b.pool.QueryRow(ctx, `
		INSERT INTO river.river_job (args, kind, max_attempts, queue, state)
		VALUES ('{}', 'rflow.from_a_newer_version', 25, $1, 'available') RETURNING id`, river.QueueDefault).Scan(&future))

	run := b.waitRun(t, b.manual(t, "three", "k1", nil))
	require.Equal(t, store.RunCompleted, run.Status)

	var state string
	var attempt int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, attempt FROM river.river_job WHERE id = $1`, future).Scan(&state, &attempt))
	require.Equal(t, "available", state)
	require.Zero(t, attempt, "never fetched, so no attempt spent")
}
