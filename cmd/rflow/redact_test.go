package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// The secrets of the URL the failing http_calls use.
const (
	leakPassword = "hunter2pw"
	leakToken    = "tok3nSECRET"
)

const leakProject = `
name: leak
workflows:
  - name: refused
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { url: "http://ops:` + leakPassword + `@%[1]s/x?token=` + leakToken + `&v=1" } }
  - name: rejected
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "http://ops:` + leakPassword + `@%[2]s/y?token=` + leakToken + `", body: { a: 1 } } }
`

// TestHTTPCallSecretsNeverShow runs `rflow start --http` with debug logs and
// two http_calls to a URL with user:password@ and ?token=: one refused at
// connect, one answered 500. Neither secret appears in the journal rows, the
// run's error, `runs show` (JSON and table), `runs list`, GET /v1/runs/{id}
// or the process's log output, while the error still names the endpoint.
func TestHTTPCallSecretsNeverShow(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedAddr := closed.Addr().String()
	closed.Close()
	rejecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "no such hook", http.StatusInternalServerError)
	}))
	defer rejecting.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(leakProject, refusedAddr, rejecting.Listener.Addr())), 0o644))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	db := storetest.URL(t)
	logs := &syncBuffer{}
	cmd := exec.Command(rflowBin, "--database-url", db, "--log-level", "debug", "start", "-c", config, "--http", addr)
	cmd.Env = append(os.Environ(), "RFLOW_API_TOKEN=t0ken")
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 30*time.Second, 50*time.Millisecond, "output: %s", logs)

	cli := func(args ...string) string {
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		require.Equal(t, 0, code, "rflow %v: %s", args, stderr)
		require.NotContains(t, stderr, leakPassword)
		require.NotContains(t, stderr, leakToken)
		return out
	}
	get := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer t0ken")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, 200, resp.StatusCode, "%s", b)
		return string(b)
	}
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	defer pool.Close()

	for _, tc := range []struct{ workflow, says string }{
		{"refused", "connection refused"},
		{"rejected", "unexpected status 500"},
	} {
		var started struct {
			RunID string `json:"run_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(cli("run", tc.workflow, "-c", config, "-o", "json")), &started))
		var show string
		require.Eventually(t, func() bool {
			show = cli("runs", "show", started.RunID, "-o", "json")
			return strings.Contains(show, `"status": "failed"`)
		}, 30*time.Second, 100*time.Millisecond)

		// The journal as stored, not as a reader renders it.
		var stored string
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT coalesce(r.error, '') || ' ' || string_agg(coalesce(s.error, '') || ' ' || coalesce(s.output::text, ''), ' ')
			FROM rflow.workflow_runs r JOIN rflow.step_runs s ON s.run_id = r.id
			WHERE r.id = $1 GROUP BY r.error`, started.RunID).Scan(&stored))
		require.Contains(t, stored, tc.says, "the step failed as planned")
		require.Regexp(t, `call: (GET|POST) http://ops:xxxxx@127\.0\.0\.1:\d+/[xy]\?token=xxxxx(&v=xxxxx)?: `, stored,
			"the error still names the endpoint")

		for where, text := range map[string]string{
			"journal":           stored,
			"runs show -o json": show,
			"runs show":         cli("runs", "show", started.RunID),
			"runs list -o json": cli("runs", "list", "--failed", "-o", "json"),
			"runs list":         cli("runs", "list", "--failed"),
			"GET /v1/runs/{id}": get("/v1/runs/" + started.RunID),
			"GET /v1/runs":      get("/v1/runs?status=failed"),
		} {
			require.NotContains(t, text, leakPassword, "%s of %s: %s", where, tc.workflow, text)
			require.NotContains(t, text, leakToken, "%s of %s: %s", where, tc.workflow, text)
		}
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("rflow did not stop; output:\n%s", logs)
	}
	require.NotEmpty(t, logs.String())
	require.NotContains(t, logs.String(), leakPassword, "logs:\n%s", logs)
	require.NotContains(t, logs.String(), leakToken, "logs:\n%s", logs)
}
