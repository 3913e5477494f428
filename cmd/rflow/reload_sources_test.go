package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/store/storetest"
)

// flakyWorkflow is a manual workflow whose call fails (one attempt) while
// the endpoint answers 500. The first %s is the endpoint, the second more
// steps.
const flakyWorkflow = `  - name: flaky
    trigger: { manual: {} }
    steps:
      - id: call
        http_call: { method: GET, url: "%s", retry: { max_attempts: 1 } }
%s`

// payStep is a send through the wallet only the reload adds; it is
// skipped (a stored spec is compiled against the project, so naming the
// wallet is what matters).
const payStep = `      - id: pay
        if: "${{ run.attempt < 0 }}"
        send: { wallet: ops, to: "0x0000000000000000000000000000000000000001", value: "0" }
`

// TestDevReloadRefreshesSourcesForRetry: a reload under `rflow dev`
// stores the reloaded project's sources, as a deploy does, so `rflow runs
// retry` where the project file is not compiles the run's generation
// against the reloaded project (here a notifier only the reload added).
func TestDevReloadRefreshesSourcesForRetry(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()

	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)
	file := filepath.Join(dir, "rflow.yaml")
	scaffold, err := os.ReadFile(file)
	require.NoError(t, err)
	v1 := string(scaffold) + fmt.Sprintf(flakyWorkflow, srv.URL, "")
	require.NoError(t, os.WriteFile(file, []byte(v1), 0o644))

	dbURL := storetest.URL(t)
	p := startRflowArgs(t, nil, "--database-url", dbURL, "dev", "--project", dir, "--http", "127.0.0.1:0",
		"--emit-every", "1s", "--chain", devchain.BackendSimulated)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rflow dev said:\n%s", p.out)
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "claimed") }, 60*time.Second, 100*time.Millisecond)

	// The reload: a wallet the first generation did not have, and a step
	// of flaky names it.
	v2 := strings.Replace(string(scaffold), "\nworkflows:\n", "\nwallets:\n  - { name: ops, private_key: \"${RFLOW_DEV_WALLET_KEY:-0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80}\" }\n\nworkflows:\n", 1) +
		fmt.Sprintf(flakyWorkflow, srv.URL, payStep)
	require.NotContains(t, string(scaffold), "\nwallets:")
	require.NoError(t, os.WriteFile(file, []byte(v2), 0o644))
	require.Eventually(t, func() bool {
		return strings.Contains(p.out.String(), "reloaded rflow.yaml: project generation 2 runs")
	}, 30*time.Second, 100*time.Millisecond)

	// Started through the API (`rflow run` would deploy the file itself).
	console := bannerConsole.FindStringSubmatch(p.out.String())
	require.NotNil(t, console, "rflow dev printed no console URL")
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(console[1], "/ui/")+"/v1/workflows/flaky/runs", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+console[2])
		req.Header.Set("Idempotency-Key", "start-flaky")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false // the new generation's server is not up yet
		}
		defer res.Body.Close()
		return res.StatusCode == http.StatusCreated && json.NewDecoder(res.Body).Decode(&started) == nil
	}, 10*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		status, _ := runStepStatus(t, dbURL, started.RunID)
		return status == "failed"
	}, 30*time.Second, 200*time.Millisecond, "the call never failed")

	// Retried where there is no project file: the project as deployed is
	// the reloaded one.
	healthy.Store(true)
	var sout, serr bytes.Buffer
	retry := exec.Command(rflowBin, "--database-url", dbURL, "runs", "retry", started.RunID)
	retry.Dir, retry.Stdout, retry.Stderr = t.TempDir(), &sout, &serr
	err = retry.Run()
	var ee *exec.ExitError
	require.False(t, errors.As(err, &ee), "runs retry failed: %s%s", sout.String(), serr.String())
	require.NoError(t, err)
	require.Contains(t, serr.String(), "using project "+filepath.Base(dir)+" as deployed")
	require.Contains(t, sout.String(), "retried")
	require.Eventually(t, func() bool {
		status, steps := runStepStatus(t, dbURL, started.RunID)
		return status == "completed" && steps["call"] == "completed"
	}, 30*time.Second, 200*time.Millisecond, "the retried run did not complete")
	p.stop(t)
}
