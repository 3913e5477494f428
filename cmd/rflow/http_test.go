package main

import (
	"bytes"
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
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/signature"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestStartServesWebhooksAndAPI runs `rflow start --http` as a process: a
// signed webhook starts a run whose step sees the body, a replay of it is a
// duplicate, a bad signature is refused, and the command API shows the run
// and its journal.
func TestStartServesWebhooksAndAPI(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
name: hooks
workflows:
  - name: on-order
    trigger:
      webhook: { secret: "hook-secret", idempotency_key: "${{ body.order_id }}" }
    steps:
      - { id: forward, http_call: { method: POST, url: "%s/forward", body: "${{ body.amount }}" } }
`, s.URL)), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	p := startRflowArgs(t, []string{"RFLOW_API_TOKEN=t0ken"}, "--database-url", storetest.URL(t), "--log-level", "warn",
		"start", "-c", config, "--http", addr)
	out := p.out
	defer p.stop(t)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 30*time.Second, 50*time.Millisecond, "output: %s", out)

	post := func(body []byte, secret string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, base+"/hooks/on-order", bytes.NewReader(body))
		signature.SignRequest(req, secret, body, nil, time.Now())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var reply map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&reply)
		return resp.StatusCode, reply
	}
	body := []byte(`{"order_id": "o-1", "amount": 115792089237316195423570985008687907853269984665640564039457584007913129639935}`)
	code, first := post(body, "hook-secret")
	require.Less(t, code, 300, "%v", first)
	require.Equal(t, false, first["duplicate"])
	code, again := post(body, "hook-secret")
	require.Less(t, code, 300)
	require.Equal(t, true, again["duplicate"])
	require.Equal(t, first["run_id"], again["run_id"])
	code, _ = post(body, "wrong-secret")
	require.Equal(t, http.StatusUnauthorized, code)

	get := func(path string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer t0ken")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	runID := first["run_id"].(string)
	require.Eventually(t, func() bool {
		code, b := get("/v1/runs/" + runID)
		return code == 200 && strings.Contains(string(b), `"status":"completed"`)
	}, 30*time.Second, 100*time.Millisecond)
	_, b := get("/v1/runs/" + runID)
	require.Contains(t, string(b), `"forward"`, "the journal comes with the run")
	require.Equal(t, 1, s.counts()[runID+":forward"], "one run, one call, despite the duplicate POST")
	code, _ = get("/v1/runs")
	require.Equal(t, 200, code)
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/runs", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API needs the token")

	// The same listener serves River UI (token) and Prometheus (no token).
	// River's completer marks the step's job completed just after the
	// worker returns, so it can trail the run's own completion.
	require.Eventually(t, func() bool {
		code, b = get("/riverui/api/jobs?state=completed")
		require.Equal(t, 200, code, "%s", b)
		return strings.Contains(string(b), `"kind":"rflow.step.first"`)
	}, 10*time.Second, 20*time.Millisecond, "the webhook run's one step, enqueued with its claim, listed as completed")
	resp, err = http.Get(base + "/riverui/api/jobs")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "River UI needs the token")
	resp, err = http.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(metrics), `rflow_claims_total{trigger="webhook",workflow="on-order"} 1`)
	require.Contains(t, string(metrics), `rflow_runs_finished_total{status="completed",workflow="on-order"} 1`)
}

// TestStartCommandIdempotency runs `rflow start --http` as a process with the
// project's idempotency: block and a flag over it: UUID spellings replay, a
// manual-run key with other input conflicts before and after its record
// expires (aged in SQL), a repeated cancel answers with the cancelled run,
// and each command's record lasts its retention.
func TestStartCommandIdempotency(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`
name: idem
idempotency:
  client_retention: 2h
  deterministic_retention: 10d
workflows:
  - name: park
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 1h }
`), 0o644))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: idem\nidempotency:\n  deterministic_retention: 6d\n"+
		"workflows:\n  - { name: park, trigger: { manual: {} }, steps: [ { id: nap, delay: 1h } ] }\n"), 0o644))
	_, stderr, code := rflowCmd(t, "validate", "-c", bad)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, bad+":3:28: idempotency.deterministic_retention 6d is below the minimum of 7d")

	db := storetest.URL(t)
	_, stderr, code = rflowCmd(t, "--database-url", db, "start", "-c", config, "--deterministic-retention", "6d")
	require.Equal(t, 2, code, "a flag below the minimum is a usage error: %s", stderr)
	require.Contains(t, stderr, "--deterministic-retention: deterministic_retention 6d is below the minimum of 7d")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	p := startRflowArgs(t, []string{"RFLOW_API_TOKEN=t0ken"}, "--database-url", db, "--log-level", "warn", "start", "-c", config, "--http", addr,
		"--deterministic-retention", "9d")
	out := p.out
	defer p.stop(t)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 30*time.Second, 50*time.Millisecond, "output: %s", out)

	type answer struct {
		code     int
		replayed bool
		body     map[string]any
		raw      string
	}
	post := func(path, key, body string) answer {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t0ken")
		req.Header.Set(server.HeaderIdempotencyKey, key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{code: resp.StatusCode, replayed: resp.Header.Get(server.HeaderReplayed) == "true", raw: string(b)}
		_ = json.Unmarshal(b, &a.body)
		return a
	}
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	retention := func(key string) time.Duration {
		var d time.Duration
		require.NoError(t, pool.QueryRow(ctx, `SELECT expires_at - created_at FROM rflow.idempotency_keys WHERE key = $1`, key).Scan(&d))
		return d
	}
	age := func() {
		_, err := pool.Exec(ctx, `UPDATE rflow.idempotency_keys SET expires_at = now() - interval '1 second'`)
		require.NoError(t, err)
	}

	id := "{" + strings.ToUpper("0b6f2f0e-8a8c-4a53-9d0b-2f2b9a4c1e11") + "}"
	first := post("/v1/workflows/park/runs", id, `{"input": {"n": 1}}`)
	require.Equal(t, http.StatusCreated, first.code, first.raw)
	runID := first.body["run_id"].(string)
	again := post("/v1/workflows/park/runs", "urn:uuid:0b6f2f0e-8a8c-4a53-9d0b-2f2b9a4c1e11", `{"input": {"n": 1}}`)
	require.True(t, again.replayed, "another spelling of the same UUID replays: %s", again.raw)
	require.Equal(t, first.raw, again.raw)
	require.Equal(t, 2*time.Hour, retention("0b6f2f0e-8a8c-4a53-9d0b-2f2b9a4c1e11"), "the project's client retention")

	age()
	replay := post("/v1/workflows/park/runs", id, `{"input": {"n": 1}}`)
	require.Equal(t, http.StatusOK, replay.code, replay.raw)
	require.Equal(t, runID, replay.body["run_id"], "after expiry the exact replay finds the same run")
	age()
	changed := post("/v1/workflows/park/runs", id, `{"input": {"n": 2}}`)
	require.Equal(t, http.StatusConflict, changed.code, changed.raw)
	require.Contains(t, changed.raw, runID)

	c1 := post("/v1/runs/"+runID+"/cancel", "cancel-1", "")
	require.Equal(t, http.StatusOK, c1.code, c1.raw)
	c2 := post("/v1/runs/"+runID+"/cancel", "cancel-2", "")
	require.Equal(t, http.StatusOK, c2.code, c2.raw)
	require.Equal(t, c1.raw, c2.raw, "a repeated cancel returns the cancelled run")
	require.Equal(t, 9*24*time.Hour, retention("cancel-1"), "the flag overrides the project file")

	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&n))
	require.Equal(t, 1, n)
}
