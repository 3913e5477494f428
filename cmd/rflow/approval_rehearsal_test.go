package main

import (
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

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const gatedReplayProject = `
name: live
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: deposits
    trigger: { event: { contract: Vault, event: Deposit, run_on: head } }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}", approval: { timeout: 1h } }
`

// TestApprovalOfReplayRefusedLive: `rflow replay` ends with its run parked
// at an approval gate (its jobs in the session's queue, which no live
// process works). Deciding that gate from the live side, with `rflow
// approve` / `rflow reject` or POST /v1/approvals/{id}/approve against the
// live `rflow start`, is refused (exit 1, 409) naming the session and the
// prune that removes it: the gate stays pending and no job of the run is
// added, where before the fix the approval was recorded and its run's next
// job waited in the ended session's queue for good. `approvals list` hides
// the gate unless --rehearsals or --workflow names it (as runs list), the
// live gate beside it is decided and sends exactly once, and prune removes
// the rehearsal's gate.
func TestApprovalOfReplayRefusedLive(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(gatedReplayProject, node.URL, "0x"+anviltest.DevKeys[4],
		em.Address.Hex())), 0o644))
	db := storetest.URL(t)
	pool := openPool(t, db)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	live := startRflowArgs(t, []string{"RFLOW_API_TOKEN=t0ken"}, "--database-url", db, "--log-level", "warn", "start", "-c", config,
		"--http", addr)
	_, from := anviltest.Key(t, 4)
	nonce := func() uint64 {
		n, err := node.Client().NonceAt(t.Context(), from, nil)
		require.NoError(t, err)
		return n
	}
	start := nonce()

	em.Deposit(1)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.approvals WHERE workflow_name = 'deposits' AND status = 'pending'`) == 1
	}, 60*time.Second, 50*time.Millisecond, "live output:\n%s", live.out)

	out, errOut, code := rflowCmd(t, "--database-url", db, "replay", "-c", config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", fmt.Sprint(node.BlockNumber()), "--dry-run", "-o", "json")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	var sum replaySummary
	require.NoError(t, json.Unmarshal([]byte(out), &sum), out)
	require.Equal(t, map[store.RunStatus]int64{store.RunWaitingApproval: 1}, sum.Statuses, "the replay ends parked at its gate")
	rehearsal, session := sum.Rehearsal, sum.Session

	type listed struct {
		Approvals []server.Approval `json:"approvals"`
	}
	list := func(args ...string) listed {
		out, errOut, code := rflowCmd(t, append([]string{"--database-url", db, "approvals", "list", "-o", "json"}, args...)...)
		require.Equal(t, 0, code, errOut)
		var l listed
		require.NoError(t, json.Unmarshal([]byte(out), &l), out)
		return l
	}
	def := list()
	require.Len(t, def.Approvals, 1, "a rehearsal's gate is hidden by default")
	require.Equal(t, "deposits", def.Approvals[0].Workflow)
	liveGate := def.Approvals[0]
	require.Len(t, list("--rehearsals").Approvals, 2)
	named := list("--workflow", rehearsal).Approvals
	require.Len(t, named, 1)
	gate := named[0]
	require.Equal(t, "pending", gate.Status)
	jobsOfRun := func() int {
		return countRows(t, pool, `SELECT count(*) FROM river.river_job WHERE coalesce(args->>'run_id', args->>0) = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, gate.RunID.String())
	}
	before := jobsOfRun()
	require.Equal(t, 1, before, "the gate's expiry job")

	for _, verb := range []string{"approve", "reject"} {
		_, errOut, code = rflowCmd(t, "--database-url", db, verb, "-c", config, gate.ShortID, "--reason", "looks fine")
		require.Equal(t, 1, code, errOut)
		require.Contains(t, errOut, "of replay session "+session)
		require.Contains(t, errOut, "rflow replay prune --session "+session)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/approvals/"+gate.ID.String()+"/approve", strings.NewReader(`{"by":"ops"}`))
	req.Header.Set("Authorization", "Bearer t0ken")
	req.Header.Set(server.HeaderIdempotencyKey, "decide-replay")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"approval_conflict"`)
	require.Contains(t, string(body), "rflow replay prune --session "+session)

	require.Equal(t, before, jobsOfRun(), "a refused decision enqueued a job")
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM rflow.approvals WHERE id = $1 AND status = 'pending' AND decided_by IS NULL`,
		gate.ID))

	// The live gate is decided as ever and sends once; the dry-run replay sent nothing.
	_, errOut, code = rflowCmd(t, "--database-url", db, "approve", "-c", config, liveGate.ShortID)
	require.Equal(t, 0, code, errOut)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE id = $1 AND status = 'completed'`, liveGate.RunID) == 1
	}, 60*time.Second, 50*time.Millisecond, "live output:\n%s", live.out)
	require.Equal(t, start+1, nonce())
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE id = $1 AND status = 'waiting_approval'`, gate.RunID))

	_, errOut, code = rflowCmd(t, "--database-url", db, "replay", "prune", "--session", session)
	require.Equal(t, 0, code, errOut)
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM rflow.approvals WHERE workflow_name = $1`, rehearsal))
	require.Zero(t, jobsOfRun())
	require.Equal(t, start+1, nonce())
}
