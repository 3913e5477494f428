package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/signature"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const (
	testToken  = "test-token"
	hookSecret = "hook-s3cret"
)

// The project every test serves. Steps park on a long delay: these tests
// are about what the HTTP surface claims and records, not about execution.
const projectYAML = `
name: servertest
workflows:
  - name: keyed
    trigger:
      webhook:
        secret: ` + hookSecret + `
        signed_headers: [x-idempotency-key]
        idempotency_key: "${{ headers['x-idempotency-key'] }}"
    steps:
      - id: park
        delay: 1h
  - name: short-ttl
    trigger:
      webhook:
        idempotency_key: "${{ body.event_id }}"
        ttl: 3s
    steps:
      - id: park
        delay: 1h
  - name: open
    trigger:
      webhook: {}
    steps:
      - id: park
        delay: 1h
  - name: manual
    trigger:
      manual: {}
    steps:
      - id: park
        delay: 1h
`

type testBundle struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	engine *jobs.Engine
	srv    *server.Server
	http   *httptest.Server
}

func setup(t *testing.T, configure ...func(*server.Config)) *testBundle {
	t.Helper()
	return newBundle(t, projectYAML, false, configure...)
}

// newBundle loads project, deploys it on a fresh database and serves it.
// With start the engine also executes runs.
func newBundle(t *testing.T, project string, start bool, configure ...func(*server.Config)) *testBundle {
	t.Helper()
	return newBundleEnv(t, project, nil, start, configure...)
}

// newBundleEnv is newBundle with env as the process environment the
// project (and definitions deployed through the API) resolve ${VAR} in;
// the project's api: tokens: are served.
func newBundleEnv(t *testing.T, project string, env map[string]string, start bool, configure ...func(*server.Config)) *testBundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(project), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	require.NoError(t, err)

	url := storetest.URL(t)
	poolCfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	poolCfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	backends, release, err := jobs.DialBackends(ctx, p, nil)
	require.NoError(t, err)
	t.Cleanup(release)
	engine, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: p, FetchCooldown: time.Millisecond, Backends: backends})
	require.NoError(t, err)
	_, err = engine.SyncWorkflows(ctx)
	require.NoError(t, err)
	if start {
		runCtx, cancel := context.WithCancel(ctx)
		require.NoError(t, engine.Start(runCtx))
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			_ = engine.Stop(sctx)
			cancel()
		})
	}

	cfg := server.Config{Pool: pool, Engine: engine, APIToken: testToken, Tokens: p.APITokens}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testBundle{ctx: ctx, pool: pool, engine: engine, srv: srv, http: ts}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// errorCode returns error.code of a JSON error reply.
func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	require.True(t, ok, "not an error reply: %s", r.body)
	require.NotEmpty(t, e["message"])
	return e["code"].(string)
}

func (b *testBundle) do(t *testing.T, method, path string, body []byte, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, method, b.http.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.http.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: got}
}

// api sends an authenticated command; key "" sends no Idempotency-Key.
func (b *testBundle) api(t *testing.T, method, path, key string, body []byte) reply {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + testToken}
	if key != "" {
		h[server.HeaderIdempotencyKey] = key
	}
	return b.do(t, method, path, body, h)
}

// signed returns the headers of a correctly signed (v2) post to path.
func signed(path string, body []byte, extra map[string]string) map[string]string {
	return signedWith(hookSecret, path, body, time.Now(), extra)
}

// signedWith signs a post to path with secret at a time: the v2 scheme,
// covering X-Idempotency-Key when extra sets it.
func signedWith(secret, path string, body []byte, at time.Time, extra map[string]string) map[string]string {
	req := httptest.NewRequest(http.MethodPost, path, nil)
	var names []string
	for k, v := range extra {
		req.Header.Set(k, v)
		if strings.EqualFold(k, "X-Idempotency-Key") {
			names = append(names, k)
		}
	}
	signature.SignRequest(req, secret, body, names, at)
	h := map[string]string{"Content-Type": "application/json"}
	for k := range req.Header {
		h[k] = req.Header.Get(k)
	}
	return h
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

func (b *testBundle) runs(t *testing.T) int {
	return b.count(t, `SELECT count(*) FROM rflow.workflow_runs`)
}

func (b *testBundle) ledger(t *testing.T) int {
	return b.count(t, `SELECT count(*) FROM rflow.idempotency_keys`)
}

// concurrently runs fn n times at once and returns the replies.
func concurrently(n int, fn func() reply) []reply {
	var wg sync.WaitGroup
	out := make([]reply, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = fn()
		})
	}
	close(start)
	wg.Wait()
	return out
}

func TestWebhookConcurrentDuplicatesMakeOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{"amount": 115792089237316195423570985008687907853269984665640564039457584007913129639935}`)

	replies := concurrently(50, func() reply {
		return b.do(t, http.MethodPost, "/hooks/keyed", body, signed("/hooks/keyed", body, map[string]string{"X-Idempotency-Key": "evt-1"}))
	})

	require.Equal(t, 1, b.runs(t), "50 identical posts, one run")
	var runID string
	created := 0
	for _, r := range replies {
		m := r.json(t)
		if runID == "" {
			runID = m["run_id"].(string)
		}
		require.Equal(t, runID, m["run_id"], "every reply names the one run")
		if m["duplicate"] == false {
			created++
			require.Equal(t, http.StatusAccepted, r.status)
		} else {
			require.Equal(t, true, m["duplicate"])
			require.Equal(t, http.StatusOK, r.status)
		}
		require.Nil(t, m["at_least_once"])
	}
	require.Equal(t, 1, created)
	require.Equal(t, 1, b.ledger(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river.river_job`), "one first-step job")

	// The run sees the body exactly (a uint256 does not lose digits) and
	// lower-cased headers.
	var trigger []byte
	var key string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT trigger::text, trigger_key FROM rflow.workflow_runs`).Scan(&trigger, &key))
	require.Contains(t, string(trigger), "115792089237316195423570985008687907853269984665640564039457584007913129639935")
	require.Contains(t, string(trigger), `"x-idempotency-key": "evt-1"`)
	require.True(t, strings.HasPrefix(key, "evt-1@"), key)
}

func TestWebhookRejectionsStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.BodyLimit = 1024 })
	body := []byte(`{"ok": true}`)
	key := map[string]string{"X-Idempotency-Key": "k"}
	old, future := time.Now().Add(-6*time.Minute), time.Now().Add(6*time.Minute)
	big := []byte(`{"pad": "` + strings.Repeat("x", 2048) + `"}`)
	malformed := []byte(`{"ok": tru`)

	cases := []struct {
		name   string
		path   string
		body   []byte
		header map[string]string
		status int
		code   string
	}{
		{"missing signature", "/hooks/keyed", body, key, http.StatusUnauthorized, "bad_signature"},
		{"wrong secret", "/hooks/keyed", body, signedWith("not-the-secret", "/hooks/keyed", body, time.Now(), key),
			http.StatusUnauthorized, "bad_signature"},
		{"signature of another body", "/hooks/keyed", body, signed("/hooks/keyed", []byte(`{"ok": false}`), key), http.StatusUnauthorized, "bad_signature"},
		{"stale timestamp", "/hooks/keyed", body, signedWith(hookSecret, "/hooks/keyed", body, old, key),
			http.StatusUnauthorized, "bad_signature"},
		{"future timestamp", "/hooks/keyed", body, signedWith(hookSecret, "/hooks/keyed", body, future, key),
			http.StatusUnauthorized, "bad_signature"},
		{"garbage signature", "/hooks/keyed", body, map[string]string{
			signature.HeaderTimestamp: strconv.FormatInt(time.Now().Unix(), 10), signature.HeaderSignature: "sha256=zz"},
			http.StatusUnauthorized, "bad_signature"},
		{"oversized", "/hooks/keyed", big, signed("/hooks/keyed", big, key), http.StatusRequestEntityTooLarge, "body_too_large"},
		{"oversized unsigned", "/hooks/open", big, nil, http.StatusRequestEntityTooLarge, "body_too_large"},
		{"malformed json", "/hooks/keyed", malformed, signed("/hooks/keyed", malformed, key), http.StatusBadRequest, "malformed_json"},
		{"malformed json unsigned", "/hooks/open", malformed, nil, http.StatusBadRequest, "malformed_json"},
		{"empty body", "/hooks/open", nil, nil, http.StatusBadRequest, "malformed_json"},
		{"missing idempotency key", "/hooks/keyed", body, signed("/hooks/keyed", body, map[string]string{"X-Idempotency-Key": ""}), http.StatusBadRequest, "missing_idempotency_key"},
		{"unknown workflow", "/hooks/nope", body, nil, http.StatusNotFound, "not_found"},
		{"not a webhook workflow", "/hooks/manual", body, nil, http.StatusNotFound, "not_found"},
	}
	for _, tc := range cases {
		r := b.do(t, http.MethodPost, tc.path, tc.body, tc.header)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.body)
		require.Equal(t, tc.code, r.errorCode(t), tc.name)
		require.Equal(t, "application/json", r.header.Get("Content-Type"), tc.name)
	}
	require.Zero(t, b.runs(t), "no rejected request created a run")
	require.Zero(t, b.ledger(t), "no rejected request recorded a key")

	// The same request, signed, goes through.
	r := b.do(t, http.MethodPost, "/hooks/keyed", body, signed("/hooks/keyed", body, key))
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, 1, b.runs(t))
}

func TestWebhookWithoutKeyIsAtLeastOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{"n": 1}`)
	h := map[string]string{"Authorization": "Bearer secret-of-the-caller", "X-Custom": "v"}
	first := b.do(t, http.MethodPost, "/hooks/open", body, h)
	second := b.do(t, http.MethodPost, "/hooks/open", body, h)
	for _, r := range []reply{first, second} {
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		m := r.json(t)
		require.Equal(t, true, m["at_least_once"], "the reply says a retry is a new run")
		require.Equal(t, false, m["duplicate"])
	}
	require.NotEqual(t, first.json(t)["run_id"], second.json(t)["run_id"])
	require.Equal(t, 2, b.runs(t))
	require.Zero(t, b.ledger(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger::text LIKE '%secret-of-the-caller%'`),
		"credentials in headers are not journaled")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger->'headers'->>'x-custom' = 'v'`))
}

func TestWebhookDuplicateWindowExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(body string) map[string]any {
		r := b.do(t, http.MethodPost, "/hooks/short-ttl", []byte(body), nil)
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, r.status, "%s", r.body)
		return r.json(t)
	}
	first := post(`{"event_id": 123456789012345678901234567890, "try": 1}`)
	require.Equal(t, false, first["duplicate"])
	again := post(`{"event_id": 123456789012345678901234567890, "try": 2}`)
	require.Equal(t, true, again["duplicate"], "same key within the ttl, whatever else the body says")
	require.Equal(t, first["run_id"], again["run_id"])
	require.Equal(t, 1, b.runs(t))

	time.Sleep(3200 * time.Millisecond)
	later := post(`{"event_id": 123456789012345678901234567890, "try": 3}`)
	require.Equal(t, false, later["duplicate"], "after the ttl the key is a new occurrence")
	require.NotEqual(t, first["run_id"], later["run_id"])
	require.Equal(t, 2, b.runs(t))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key LIKE '123456789012345678901234567890@%'`),
		"the key is rendered exactly")
}

func TestCommandConcurrentSameKeyOneMutation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{"input": {"amount": 340282366920938463463374607431768211456}}`)
	replies := concurrently(50, func() reply {
		return b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-1", body)
	})
	require.Equal(t, 1, b.runs(t), "one mutation")
	replayed := 0
	for _, r := range replies {
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		require.Equal(t, replies[0].body, r.body, "identical responses, byte for byte")
		if r.header.Get(server.HeaderReplayed) == "true" {
			replayed++
		}
	}
	require.Equal(t, 49, replayed)
	require.Equal(t, 1, b.ledger(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river.river_job`),
		"the run's first step job committed with it, once")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM rflow.workflow_runs
		WHERE trigger::text LIKE '%340282366920938463463374607431768211456%' AND trigger_kind = 'manual'`))

	// Later retries get the same bytes too.
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-1", body)
	require.Equal(t, replies[0].body, r.body)
	require.Equal(t, 1, b.runs(t))
}

func TestCommandKeyReusedForAnotherRequestConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k", []byte(`{"input": 1}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k", []byte(`{"input": 2}`))
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "idempotency_key_reused", r.errorCode(t))
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "different request")

	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "k", []byte(`{"input": 1}`))
	require.Equal(t, http.StatusConflict, r.status, "another endpoint is another request")
	require.Equal(t, 1, b.runs(t))
}

func TestCommandNeedsIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/v1/workflows/manual/runs"},
		{http.MethodPut, "/v1/workflows/manual"},
		{http.MethodPost, "/v1/runs/" + uuid.NewString() + "/retry"},
		{http.MethodPost, "/v1/runs/" + uuid.NewString() + "/cancel"},
	} {
		r := b.api(t, c.method, c.path, "", []byte(`{}`))
		require.Equal(t, http.StatusBadRequest, r.status, c.path)
		require.Equal(t, "missing_idempotency_key", r.errorCode(t))
	}
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", strings.Repeat("k", 256), nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Zero(t, b.runs(t))
	require.Zero(t, b.ledger(t))
}

func TestCommandAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/v1/runs", nil, nil)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "unauthorized", r.errorCode(t))
	require.NotEmpty(t, r.header.Get("WWW-Authenticate"))
	r = b.do(t, http.MethodPost, "/v1/workflows/manual/runs", nil,
		map[string]string{"Authorization": "Bearer wrong", server.HeaderIdempotencyKey: "x"})
	require.Equal(t, http.StatusUnauthorized, r.status)
	r = b.api(t, http.MethodGet, "/v1/runs", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Zero(t, b.ledger(t))

	off := setup(t, func(c *server.Config) { c.APIToken = "" })
	r = off.api(t, http.MethodGet, "/v1/runs", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "api_disabled", r.errorCode(t))
	require.Contains(t, string(r.body), "RFLOW_API_TOKEN")
	r = off.do(t, http.MethodGet, "/v1/runs", nil, map[string]string{"Authorization": "Bearer "})
	require.Equal(t, http.StatusServiceUnavailable, r.status, "an empty token never opens the API")
}

func TestCommandKeyExpires(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.ClientTTL = 3 * time.Second })
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k", []byte(`{"input": 1}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k", []byte(`{"input": 2}`))
	require.Equal(t, http.StatusConflict, r.status)

	time.Sleep(3200 * time.Millisecond)
	// The ledger forgot k, but the run it made did not: another input is
	// still a conflict, and the key is free for another command.
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k", []byte(`{"input": 2}`))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "run_key_reused", r.errorCode(t))
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k", []byte(`{"input": 2, "key": "other"}`))
	require.Equal(t, http.StatusCreated, r.status, "an expired key is free again: %s", r.body)
	require.Empty(t, r.header.Get(server.HeaderReplayed))
	require.Equal(t, 2, b.runs(t))
	require.Equal(t, 1, b.ledger(t), "the expired entry was taken over, not duplicated")
}

func TestCommandRetentionClasses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	expiry := func(key string) time.Duration {
		var d time.Duration
		require.NoError(t, b.pool.QueryRow(b.ctx, `
			SELECT expires_at - created_at FROM rflow.idempotency_keys WHERE key = $1`, key).Scan(&d))
		return d
	}
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "client-1", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, server.DefaultClientTTL, expiry("client-1"))

	r = b.do(t, http.MethodPost, "/v1/workflows/manual/runs", nil, map[string]string{
		"Authorization": "Bearer " + testToken, server.HeaderIdempotencyKey: "auto-1",
		server.HeaderIdempotencyClass: "automatic"})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, server.DefaultAutoTTL, expiry("auto-1"))

	r = b.do(t, http.MethodPost, "/v1/workflows/manual/runs", nil, map[string]string{
		"Authorization": "Bearer " + testToken, server.HeaderIdempotencyKey: "x", server.HeaderIdempotencyClass: "forever"})
	require.Equal(t, http.StatusBadRequest, r.status)
}

func TestConfigRefusesShortAutomaticRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := server.New(server.Config{Pool: b.pool, Engine: b.engine, AutoTTL: 6 * 24 * time.Hour})
	require.ErrorContains(t, err, "below the minimum of 7d")
	_, err = server.New(server.Config{Pool: b.pool, Engine: b.engine, AutoTTL: 7 * 24 * time.Hour, ClientTTL: time.Minute})
	require.NoError(t, err)
	_, err = server.New(server.Config{Pool: b.pool, Engine: b.engine, ClientTTL: -time.Second})
	require.Error(t, err)
	_, err = server.New(server.Config{Engine: b.engine})
	require.Error(t, err)
}

func TestManualRunKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "a", []byte(`{"key": "order-7"}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	first := r.json(t)
	require.Equal(t, false, first["duplicate"])

	// Another Idempotency-Key, same trigger key and input: the claim gate answers.
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "b", []byte(`{"key": "order-7"}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, true, r.json(t)["duplicate"])
	require.Equal(t, first["run_id"], r.json(t)["run_id"])
	require.Equal(t, 1, b.runs(t))

	r = b.api(t, http.MethodPost, "/v1/workflows/nope/runs", "c", nil)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], `no workflow "nope" is deployed`)
	// A webhook workflow's runs come through its signed hook, never as a
	// manual run that skips the signature.
	r = b.api(t, http.MethodPost, "/v1/workflows/keyed/runs", "e", nil)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "not_manual", r.errorCode(t))
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "POST /hooks/keyed")
	require.Equal(t, 1, b.runs(t))
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "d", []byte(`{"inptu": 1}`))
	require.Equal(t, http.StatusBadRequest, r.status, "unknown fields are refused: %s", r.body)
	require.Equal(t, 2, b.ledger(t), "failed commands record nothing")
}

func TestDeployBumpsGenerationAndKeepsRunsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run-1", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	runID := r.json(t)["run_id"].(string)

	def := func(delay string) []byte {
		return []byte(fmt.Sprintf("name: manual\ntrigger:\n  manual: {}\nsteps:\n  - id: park\n    delay: %s\n", delay))
	}
	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-same", def("1h"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, map[string]any{"name": "manual", "generation": float64(1), "changed": false}, r.json(t))

	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-2", def("2h"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, map[string]any{"name": "manual", "generation": float64(2), "changed": true, "previous_generation": float64(1)}, r.json(t))

	r = b.api(t, http.MethodGet, "/v1/runs/"+runID, "", nil)
	require.Equal(t, http.StatusOK, r.status)
	run := r.json(t)["run"].(map[string]any)
	require.Equal(t, float64(1), run["generation"], "a run in flight keeps the definition it was claimed under")

	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run-2", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.api(t, http.MethodGet, "/v1/runs/"+r.json(t)["run_id"].(string), "", nil)
	require.Equal(t, float64(2), r.json(t)["run"].(map[string]any)["generation"])

	// Invalid: every problem listed, nothing deployed or recorded.
	ledger := b.ledger(t)
	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-bad",
		[]byte("name: manual\ntrigger:\n  manual: {}\nsteps:\n  - id: a\n    delay: soon\n  - id: a\n    delay: 1h\n"))
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Equal(t, "invalid_workflow", r.errorCode(t))
	details := r.json(t)["error"].(map[string]any)["details"].([]any)
	require.GreaterOrEqual(t, len(details), 2, "all problems at once: %s", r.body)
	require.Equal(t, ledger, b.ledger(t))
	require.Equal(t, 2, b.count(t, `SELECT generation FROM rflow.workflows WHERE name = 'manual'`))

	r = b.api(t, http.MethodPut, "/v1/workflows/other", "deploy-name", def("1h"))
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "a definition named differently from the path: %s", r.body)
}

func TestRunsListGetCancelRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := range 3 {
		r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", fmt.Sprintf("r%d", i), nil)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		ids = append(ids, r.json(t)["run_id"].(string))
	}
	body := []byte(`{}`)
	r := b.do(t, http.MethodPost, "/hooks/open", body, nil)
	require.Equal(t, http.StatusAccepted, r.status)

	list := func(query string) []any {
		r := b.api(t, http.MethodGet, "/v1/runs"+query, "", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.json(t)["runs"].([]any)
	}
	require.Len(t, list(""), 4)
	require.Len(t, list("?workflow=manual"), 3)
	page := b.api(t, http.MethodGet, "/v1/runs?workflow=manual&limit=2", "", nil).json(t)
	require.Len(t, page["runs"], 2)
	require.Len(t, list("?workflow=manual&before="+page["next_before"].(string)), 1)
	require.Empty(t, list("?status=cancelled"))
	for _, q := range []string{"?limit=0", "?limit=x", "?status=bogus", "?before=nope"} {
		r := b.api(t, http.MethodGet, "/v1/runs"+q, "", nil)
		require.Equal(t, http.StatusBadRequest, r.status, q)
	}

	r = b.api(t, http.MethodGet, "/v1/runs/"+ids[0], "", nil)
	require.Equal(t, http.StatusOK, r.status)
	detail := r.json(t)
	require.Equal(t, ids[0], detail["run"].(map[string]any)["id"])
	steps := detail["steps"].([]any)
	require.NotEmpty(t, steps, "the step journal comes with the run")
	require.Equal(t, "park", steps[0].(map[string]any)["step_id"])
	r = b.api(t, http.MethodGet, "/v1/runs/"+uuid.NewString(), "", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "not_found", r.errorCode(t))
	r = b.api(t, http.MethodGet, "/v1/runs/not-a-uuid", "", nil)
	require.Equal(t, http.StatusBadRequest, r.status)

	cancel := b.api(t, http.MethodPost, "/v1/runs/"+ids[0]+"/cancel", "c1", nil)
	require.Equal(t, http.StatusOK, cancel.status, "%s", cancel.body)
	require.Equal(t, "cancelled", cancel.json(t)["run"].(map[string]any)["status"])
	again := b.api(t, http.MethodPost, "/v1/runs/"+ids[0]+"/cancel", "c1", nil)
	require.Equal(t, cancel.body, again.body, "a retried cancel replays its response")
	r = b.api(t, http.MethodPost, "/v1/runs/"+ids[0]+"/cancel", "c2", nil)
	require.Equal(t, http.StatusOK, r.status, "a repeated cancel under another key: %s", r.body)
	require.Equal(t, cancel.body, r.body, "it answers with the run as the first cancel left it")
	require.Len(t, list("?status=cancelled"), 1)

	r = b.api(t, http.MethodPost, "/v1/runs/"+ids[1]+"/retry", "t1", nil)
	require.Equal(t, http.StatusConflict, r.status, "only failed runs are retried: %s", r.body)
	require.Equal(t, "invalid_state", r.errorCode(t))
	r = b.api(t, http.MethodPost, "/v1/runs/"+uuid.NewString()+"/retry", "t2", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM rflow.idempotency_keys WHERE scope = 'v1' AND (key LIKE 't%' OR key LIKE 'c%')`),
		"only the successful cancels were recorded")
}

func TestHealthAndErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	r = b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusOK, r.status)

	r = b.do(t, http.MethodGet, "/nowhere", nil, nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "not_found", r.errorCode(t))
	r = b.do(t, http.MethodGet, "/hooks/keyed", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Equal(t, "method_not_allowed", r.errorCode(t))
	require.Equal(t, "POST", r.header.Get("Allow"))

	b.pool.Close()
	r = b.do(t, http.MethodGet, "/readyz", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "database_unreachable", r.errorCode(t))
	r = b.do(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, r.status, "the process is still up")
}

func TestServeShutsDownOnCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { done <- b.srv.Serve(ctx, ln) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	_, err = http.Get("http://" + ln.Addr().String() + "/healthz")
	require.Error(t, err, "the listener is closed")
}
