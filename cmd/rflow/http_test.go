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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set(signature.HeaderTimestamp, ts)
		req.Header.Set(signature.HeaderSignature, signature.Sign(secret, ts, body))
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
}
