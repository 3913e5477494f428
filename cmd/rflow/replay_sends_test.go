package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

const budgetedReplayProject = `
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
    budgets:
      - { name: payouts, asset: native, cap: "5 gwei", window: 24h }
    steps:
      - { id: pay, send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}", budget: payouts } }
`

// A replay's sends are simulated unless --live-sends; live, they count
// against the workflow's live budget, so a replay of 4 deposits after 4
// live payouts under a 5 gwei cap pays once and is refused three times.
func TestReplaySendsCountAgainstLiveBudgets(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(budgetedReplayProject, node.URL, "0x"+anviltest.DevKeys[4],
		em.Address.Hex())), 0o644))
	dbURL := storetest.URL(t)
	pool := openPool(t, dbURL)
	live := startRflow(t, dbURL, config, "")
	for i := 1; i <= 4; i++ {
		em.Deposit(int64(i))
	}
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'deposits' AND status = 'completed'`) == 4
	}, 60*time.Second, 50*time.Millisecond, "live output:\n%s", live.out)
	live.stop(t)
	_, from := anviltest.Key(t, 4)
	nonce := func() uint64 {
		n, err := node.Client().NonceAt(t.Context(), from, nil)
		require.NoError(t, err)
		return n
	}
	require.EqualValues(t, 4, nonce())
	head := fmt.Sprint(node.BlockNumber())

	// Without --live-sends: simulated, whatever the budget says.
	out, errOut, code := rflowCmd(t, "--database-url", dbURL, "replay", "-c", config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", head, "-o", "json")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, errOut, "(dry run: sends are simulated; --live-sends broadcasts them)")
	var sum replaySummary
	require.NoError(t, json.Unmarshal([]byte(out), &sum), out)
	require.True(t, sum.DryRun)
	require.EqualValues(t, 4, nonce(), "a replay without --live-sends sends nothing")

	out, errOut, code = rflowCmd(t, "--database-url", dbURL, "replay", "-c", config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", head, "--live-sends", "-o", "json")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &sum), out)
	require.True(t, sum.LiveSends)
	require.Equal(t, int64(1), sum.Statuses["completed"], out)
	require.Equal(t, int64(3), sum.Statuses["failed"], out)
	require.Eventually(t, func() bool { return nonce() == 5 }, 30*time.Second, 50*time.Millisecond, "one replay send fit the cap")
	require.Equal(t, 3, countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1 AND error LIKE '%budget%'`,
		"replay_"+sum.Session+"__deposits"))
	var spent string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT coalesce(sum(amount), 0)::text FROM rflow.budget_reservations
		WHERE workflow_name = 'deposits' AND status = 'spent'`).Scan(&spent))
	require.Equal(t, "5000000000", spent, "the live budget holds all five sends")

	_, errOut, code = rflowCmd(t, "--database-url", dbURL, "replay", "-c", config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", head, "--live-sends", "--dry-run")
	require.Equal(t, 2, code)
	require.True(t, strings.Contains(errOut, "exclude each other"), errOut)
}
