package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

const deployedProjectYAML = `
name: deployed
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "${DEPLOYED_OPS_KEY}" }
contracts:
  - { name: Emitter, abi: ./abis/Emitter.json, network: local, address: %q }
workflows:
  - include: workflows/*.yaml
`

const deployedWorkflowYAML = `
name: payout
trigger: { manual: {} }
steps:
  - id: check
    http_call: { url: "%s/flaky", retry: { max_attempts: 1 } }
  - id: pay
    send: { wallet: ops, contract: Emitter, function: claim, args: ["7"] }
`

// runs retry and workflows resume need only the database: run where the
// project's files are not (no rflow.yaml, no ABI, no secrets), they compile
// the workflow from the project as last deployed, ABIs included, and the
// running engine works what they enqueued.
func TestRetryAndResumeWithoutTheProjectFiles(t *testing.T) {
	t.Parallel()
	if _, err := anviltest.Binary(); err != nil {
		t.Skip(err)
	}
	node := anviltest.Start(t, anviltest.Options{BlockTime: time.Second})
	em := anviltest.DeployEmitter(t, node)
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "abis"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "workflows"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "abis", "Emitter.json"), anviltest.EmitterABIJSON(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "workflows", "payout.yaml"), []byte(fmt.Sprintf(deployedWorkflowYAML, srv.URL)), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(deployedProjectYAML, node.URL, em.Address.Hex())), 0o644))
	db := storetest.URL(t)
	key := []string{"DEPLOYED_OPS_KEY=0x" + anviltest.DevKeys[1]}
	p := startRflowArgs(t, key, "--database-url", db, "--log-level", "warn", "start", "-c", config)
	defer p.stop(t)

	cli := func(args ...string) (string, string) {
		t.Helper()
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		require.Equal(t, 0, code, "rflow %v: %s%s", args, out, stderr)
		return out, stderr
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Eventually(t, func() bool {
		out, _, code := rflowEnv(t, key, "--database-url", db, "run", "payout", "-c", config, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &started) == nil
	}, 30*time.Second, 200*time.Millisecond)
	status := func() string {
		out, _ := cli("runs", "show", started.RunID, "-o", "json")
		var r struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		return r.Status
	}
	require.Eventually(t, func() bool { return status() == "failed" }, 60*time.Second, 200*time.Millisecond)

	// The files are gone; the operator is elsewhere, without the secret.
	require.NoError(t, os.RemoveAll(dir))
	fail.Store(false)
	cli("workflows", "pause", "payout")
	_, stderr := cli("workflows", "resume", "payout")
	require.Contains(t, stderr, "using project deployed as deployed")
	out, stderr := cli("runs", "retry", started.RunID)
	require.Contains(t, out, "retried")
	require.Contains(t, stderr, "no rflow.yaml here: using project deployed as deployed")
	require.Eventually(t, func() bool { return status() == "completed" }, 60*time.Second, 200*time.Millisecond,
		"the retried run paid through the ABI kept in the database")
}
