package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/metrics"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// opsProject runs one call to completion, dead-letters one failing call
// and parks one run on a long delay.
func opsProject(url string) string {
	return fmt.Sprintf(`
name: opstest
workflows:
  - name: flow
    trigger: { manual: {} }
    steps:
      - id: call
        http_call: { url: "%[1]s/ok" }
  - name: bad
    trigger: { manual: {} }
    steps:
      - id: call
        http_call: { url: "%[1]s/fail", retry: { max_attempts: 1 } }
  - name: park
    trigger: { manual: {} }
    steps:
      - id: wait
        delay: 1h
`, url)
}

// opsBundle is a real engine, observed by a metrics registry, behind a
// server that mounts River UI and /metrics, served by Serve (which starts
// River UI's services) on a loopback port.
type opsBundle struct {
	*testBundle
	base string
}

func newOpsBundle(t *testing.T, project string, configure ...func(*server.Config)) *opsBundle {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(project), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	m := metrics.New(metrics.Config{Pool: pool, CacheTTL: time.Nanosecond})
	engine, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: p, FetchCooldown: time.Millisecond, Observer: m})
	require.NoError(t, err)
	_, err = engine.SyncWorkflows(ctx)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	require.NoError(t, engine.Start(runCtx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		_ = engine.Stop(sctx)
	})
	cfg := server.Config{Pool: pool, Engine: engine, APIToken: testToken, River: engine.Client(), Metrics: m.Handler()}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(runCtx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + ln.Addr().String()
	return &opsBundle{testBundle: &testBundle{ctx: ctx, pool: pool, engine: engine, srv: srv}, base: base}
}

func (b *opsBundle) get(t *testing.T, path string, token bool) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+path, nil)
	require.NoError(t, err)
	if token {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

func (b *opsBundle) start(t *testing.T, workflow, key string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.base+"/v1/workflows/"+workflow+"/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set(server.HeaderIdempotencyKey, key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	var out struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	return out.RunID
}

func (b *opsBundle) waitStatus(t *testing.T, id, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE id = $1 AND status = $2`, id, want) == 1
	}, 30*time.Second, 20*time.Millisecond, "run %s never reached %s", id, want)
}

// scrape parses /metrics.
func (b *opsBundle) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	r := b.get(t, "/metrics", false)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(r.body)))
	require.NoError(t, err)
	return families
}

// value returns the sample of family whose labels include want (a
// histogram's sample count), failing when there is none.
func value(t *testing.T, families map[string]*dto.MetricFamily, family string, want map[string]string) float64 {
	t.Helper()
	f := families[family]
	require.NotNil(t, f, "no family %s", family)
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no %s sample with labels %v", family, want)
	return 0
}

// TestMetricsAfterRealRuns: after a completed, a dead-lettered and a
// parked run, one scrape reports each of them where docs/operations.md
// says, without the token.
func TestMetricsAfterRealRuns(t *testing.T) {
	t.Parallel()
	c := newCalls(t)
	c.fail500["/fail"] = 1
	b := newOpsBundle(t, opsProject(c.URL))
	ok := b.start(t, "flow", "m-ok")
	bad := b.start(t, "bad", "m-bad")
	parked := b.start(t, "park", "m-park")
	b.waitStatus(t, ok, "completed")
	b.waitStatus(t, bad, "failed")
	b.waitStatus(t, parked, "waiting_delay")

	f := b.scrape(t)
	require.Equal(t, 1.0, value(t, f, "rflow_claims_total", map[string]string{"workflow": "flow", "trigger": "manual"}))
	require.Equal(t, 1.0, value(t, f, "rflow_claims_total", map[string]string{"workflow": "park", "trigger": "manual"}))
	require.Equal(t, 1.0, value(t, f, "rflow_step_duration_seconds", map[string]string{"kind": "http_call", "status": "completed"}))
	require.Equal(t, 1.0, value(t, f, "rflow_step_duration_seconds", map[string]string{"kind": "http_call", "status": "failed"}))
	require.Equal(t, 1.0, value(t, f, "rflow_runs_finished_total", map[string]string{"workflow": "flow", "status": "completed"}))
	require.Equal(t, 1.0, value(t, f, "rflow_runs_finished_total", map[string]string{"workflow": "bad", "status": "failed"}))
	require.Equal(t, 1.0, value(t, f, "rflow_runs", map[string]string{"workflow": "park", "status": "waiting_delay"}))
	require.Equal(t, 1.0, value(t, f, "rflow_dead_letter_runs", map[string]string{"workflow": "bad"}))
	require.Equal(t, 0.0, value(t, f, "rflow_dead_letter_runs", map[string]string{"workflow": "flow"}))
	require.Equal(t, 1.0, value(t, f, "rflow_river_jobs", map[string]string{"queue": "default", "state": "scheduled"}),
		"the parked run's delay job waits in River")
	require.Equal(t, 1.0, value(t, f, "rflow_database_up", nil))
	for _, gone := range []string{"rflow_runs"} {
		for _, m := range f[gone].GetMetric() {
			for _, l := range m.GetLabel() {
				require.NotEqual(t, "completed", l.GetValue(), "finished runs are counted, not gauged")
			}
		}
	}

	// The database going away is a gauge, not a failed scrape.
	b.pool.Close()
	f = b.scrape(t)
	require.Equal(t, 0.0, value(t, f, "rflow_database_up", nil))
	require.Equal(t, 1.0, value(t, f, "rflow_claims_total", map[string]string{"workflow": "flow", "trigger": "manual"}))
}

// TestRiverUIBehindToken: River UI's API lists rflow's step jobs with the
// token and refuses without it; its pages are served under /riverui/, and
// a browser without a session is sent to the console's login.
func TestRiverUIBehindToken(t *testing.T) {
	t.Parallel()
	c := newCalls(t)
	b := newOpsBundle(t, opsProject(c.URL))
	b.waitStatus(t, b.start(t, "flow", "ui-ok"), "completed")

	r := b.get(t, "/riverui/api/jobs?state=completed", false)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Equal(t, "unauthorized", r.errorCode(t))
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+"/riverui/", nil)
	require.NoError(t, err)
	res, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ui/login?next=%2Friverui%2F", res.Header.Get("Location"))

	// River's completer marks the step's job completed just after the
	// worker returns, so it can trail the run's own completion.
	require.Eventually(t, func() bool {
		r := b.get(t, "/riverui/api/jobs?state=completed", true)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var list struct {
			Data []struct {
				Kind  string `json:"kind"`
				State string `json:"state"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.body, &list), "%s", r.body)
		kinds := map[string]int{}
		for _, j := range list.Data {
			require.Equal(t, "completed", j.State)
			kinds[j.Kind]++
		}
		return kinds["rflow.step.first"] == 1
	}, 10*time.Second, 20*time.Millisecond, "the run's one step job, enqueued with its claim, listed as completed")

	r = b.get(t, "/riverui/", true)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "text/html")
	require.Contains(t, string(r.body), "/riverui/", "the page's assets are under the prefix")
}

// TestRiverUIOffWithoutToken: with no API token configured River UI is
// disabled like the command API, never open.
func TestRiverUIOffWithoutToken(t *testing.T) {
	t.Parallel()
	c := newCalls(t)
	b := newOpsBundle(t, opsProject(c.URL), func(cfg *server.Config) { cfg.APIToken = "" })
	r := b.get(t, "/riverui/api/jobs", true)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "api_disabled", r.errorCode(t))
}

// TestReadyzFailsOnStalledTrigger: /readyz answers 503 with the stuck
// cursors (a trigger's and a wait feed's) when a block arrived after they
// last moved and waited for longer than ReadyStall, ignores cursors of tasks
// it was not given, and is ready again once they move; /healthz stays 200
// throughout.
func TestReadyzFailsOnStalledTrigger(t *testing.T) {
	t.Parallel()
	const wait = "wait/1/any/0xtopic"
	b := setup(t, func(c *server.Config) {
		c.ReadyStall = time.Minute
		c.Watch = func(context.Context) (server.ChainWatch, error) {
			return server.ChainWatch{Tasks: []string{"event/keyed", wait}, Networks: []server.WatchedNetwork{{Name: "main", ChainID: 1}}}, nil
		}
	})
	exec := func(sql string) {
		t.Helper()
		_, err := b.pool.Exec(b.ctx, sql)
		require.NoError(t, err)
	}
	// Block n arrived 20-n minutes ago: a block a minute.
	exec(`INSERT INTO indexer.blocks (chain_id, number, hash, parent_hash, seen_at)
		SELECT 1, n, 'h' || n, 'h' || (n - 1), now() - make_interval(mins => 20 - n) FROM generate_series(10, 20) n`)
	exec(`INSERT INTO indexer.cursors (task, phase, chain_id, block, updated_at) VALUES
		('event/removed', 'head', 1, 10, now() - interval '1 hour')`)
	r := b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusOK, r.status, "a task this project does not run is not watched: %s", r.body)

	exec(`INSERT INTO indexer.cursors (task, phase, chain_id, block, updated_at) VALUES
		('event/keyed', 'head', 1, 12, now() - interval '15 minutes'),
		('` + wait + `', 'head', 1, 20, now() - interval '30 seconds')`)
	r = b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	require.Equal(t, "trigger_stalled", r.errorCode(t))
	details := r.json(t)["error"].(map[string]any)["details"].(map[string]any)
	stalled := details["stalled"].([]any)
	require.Len(t, stalled, 1, "the wait feed is at the head: %s", r.body)
	got := stalled[0].(map[string]any)
	require.Equal(t, "event/keyed", got["trigger"])
	require.Equal(t, "event/keyed", got["task"])
	require.Equal(t, "main", got["network"])
	require.Equal(t, float64(12), got["block"])
	require.Equal(t, float64(20), got["head"])
	require.Equal(t, "7m0s", got["stalled_for"], "block 13 has waited 7 minutes")
	require.Empty(t, details["heads"], "the head moves")
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "event/keyed (head) on network main is at block 12, the head at 20, stalled for 7m0s")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil, nil).status, "liveness only")

	// The wait feed falls behind too: a block arrived 5 minutes after it
	// last moved.
	exec(`UPDATE indexer.cursors SET block = 14, updated_at = now() - interval '10 minutes' WHERE task = '` + wait + `'`)
	r = b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	stalled = r.json(t)["error"].(map[string]any)["details"].(map[string]any)["stalled"].([]any)
	require.Len(t, stalled, 2, "%s", r.body)
	require.Equal(t, wait, stalled[1].(map[string]any)["task"])

	exec(`UPDATE indexer.cursors SET block = 20, updated_at = now() WHERE task IN ('event/keyed', '` + wait + `')`)
	r = b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

// TestReadyzFailsOnStalledHead: a watched network whose window has not
// advanced for longer than ReadyStall fails readiness with head_stalled,
// naming the network, how long, and why as far as the database knows:
// the node never answered, it answers without advancing, the tracker
// trails its node, or nobody holds the head lease. A slow chain's own
// block time stretches the stall allowed.
func TestReadyzFailsOnStalledHead(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) {
		c.ReadyStall = time.Minute
		c.Watch = func(context.Context) (server.ChainWatch, error) {
			return server.ChainWatch{Tasks: []string{"event/keyed"}, Networks: []server.WatchedNetwork{{Name: "main", ChainID: 1}}}, nil
		}
	})
	exec := func(sql string) {
		t.Helper()
		_, err := b.pool.Exec(b.ctx, sql)
		require.NoError(t, err)
	}
	exec(`INSERT INTO indexer.blocks (chain_id, number, hash, parent_hash, seen_at)
		SELECT 1, n, 'h' || n, 'h' || (n - 1), now() - make_interval(mins => 25 - n) FROM generate_series(10, 20) n`)
	exec(`INSERT INTO indexer.cursors (task, phase, chain_id, block, updated_at) VALUES ('event/keyed', 'head', 1, 20, now() - interval '5 minutes')`)
	head := func(cause string) map[string]any {
		t.Helper()
		r := b.do(t, http.MethodGet, "/readyz", nil, nil)
		require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
		require.Equal(t, "head_stalled", r.errorCode(t))
		e := r.json(t)["error"].(map[string]any)
		heads := e["details"].(map[string]any)["heads"].([]any)
		require.Len(t, heads, 1)
		h := heads[0].(map[string]any)
		require.Equal(t, "head/1", h["task"])
		require.Equal(t, "main", h["network"])
		require.Equal(t, "5m0s", h["stalled_for"])
		require.Equal(t, cause, h["cause"], "%s", r.body)
		require.Contains(t, e["message"], "network main (chain 1): no new block for 5m0s")
		require.Empty(t, e["details"].(map[string]any)["stalled"], "the trigger is at the head it knows")
		return h
	}
	head("node_unreachable")

	exec(`INSERT INTO rflow.leases (name, owner, token, expires_at) VALUES ('p/head/1', 'proc-a', 1, now() + interval '1 minute')`)
	exec(`INSERT INTO indexer.heads (chain_id, network, lease, lease_token, node_head, node_head_time, polled_at)
		VALUES (1, 'main', 'p/head/1', 1, 20, now() - interval '5 minutes', now())`)
	h := head("node_not_advancing")
	require.Equal(t, "proc-a", h["holder"])
	require.Equal(t, true, h["lease_live"])

	exec(`UPDATE indexer.heads SET node_head = 30`)
	h = head("tracker_behind")
	require.Equal(t, float64(30), h["node_head"])
	require.Equal(t, float64(20), h["head"])

	exec(`UPDATE indexer.heads SET polled_at = now() - interval '3 minutes'`)
	head("node_unreachable")

	exec(`UPDATE rflow.leases SET expires_at = now() - interval '1 second'`)
	head("not_running")

	// Blocks every 2 minutes: 5 minutes without one is within three block
	// times.
	exec(`UPDATE indexer.heads SET block_time = 120`)
	r := b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}
