package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/units"
)

// amountsProject: pipeline sends 0.0292 of the network's currency (tETH,
// declared with currency:) under a 0.5 tETH budget; idle has a 10,000 tETH
// budget and a 2.5 VLT one (Vault declared a 6-decimal token) and sends
// nothing.
const amountsProject = `
name: amounts
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms, currency: { symbol: tETH, decimals: 18 } }
wallets:
  - { name: ops, private_key: %q }
contracts:
  - { name: Vault, abi: ./Vault.json, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3", token: { symbol: VLT, decimals: 6 } }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "0.5 ether", window: 24h }]
    steps:
      - id: pay
        send: { wallet: ops, to: %q, value: "${{ ether('0.0292') }}", budget: petty }
  - name: idle
    trigger: { manual: {} }
    budgets:
      - { name: reserve, asset: native, cap: "10000 ether", window: 1h }
      - { name: vault, asset: Vault, cap: "2500000", window: 1h }
    steps:
      - id: nothing
        noop: {}
`

// TestAmountsInUnits: after a real send on anvil, `budgets ls` shows cap,
// reserved, spent and remaining in the network's currency with the wei
// beside each, aligned on the decimal point, and `runs show` shows what
// the send moved the same way; -o json keeps its raw integers as they were.
func TestAmountsInUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	to := common.HexToAddress("0x00000000000000000000000000000000a11ce5e7")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(amountsProject, node.URL, "0x"+anviltest.DevKeys[3], to.Hex())), 0o644))
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()

	enqueueManual(t, pool, config, 1)
	p := startRflow(t, dbURL, config, "")
	runs := waitRunsEnded(t, pool, 1, 60*time.Second)
	p.stop(t)
	var run *store.Run
	for _, r := range runs {
		run = r
	}
	require.Equal(t, store.RunCompleted, run.Status, "output:\n%s", p.out)
	bal, err := node.Client().BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, "29200000000000000", bal.String(), "the send reached the chain")

	out, errOut, code := rflowCmd(t, "--database-url", dbURL, "budgets", "ls", "-c", config)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	idle, vault, petty := lines[1], lines[2], lines[3]
	require.Contains(t, vault, "idle      vault    Vault (VLT)    1h0m0s")
	require.Contains(t, vault, "2.5    VLT (2500000)", "a token budget reads in its token: unit")
	t.Logf("budgets ls:\n%s", out)
	require.Contains(t, idle, "idle      reserve  native (tETH)  1h0m0s")
	require.Contains(t, petty, "pipeline  petty    native (tETH)  24h0m0s")
	require.Contains(t, idle, "10,000   tETH (10000000000000000000000 wei)")
	require.Contains(t, petty, "     0.5 tETH (500000000000000000 wei)")
	require.Contains(t, petty, "0.0292 tETH (29200000000000000 wei)", "spent, in the same unit as the cap")
	require.Contains(t, petty, "0.4708 tETH (470800000000000000 wei)", "remaining")
	require.NotContains(t, out, "0.5 ether", "one unit for every amount, not the cap as written")
	require.Equal(t, unitColumns(idle), unitColumns(petty), "each amount column is aligned on its unit:\n%s", out)

	out, errOut, code = rflowCmd(t, "--database-url", dbURL, "budgets", "ls", "-c", config, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 3)
	require.Equal(t, "29200000000000000", rows[2]["spent"], "raw fields keep their type")
	require.Equal(t, "500000000000000000", rows[2]["cap"])
	require.Equal(t, "0.5 ether", rows[2]["cap_text"])
	require.Equal(t, map[string]any{"symbol": "tETH", "decimals": float64(18), "base": "wei"}, rows[2]["unit"])
	require.Equal(t, map[string]any{"symbol": "VLT", "decimals": float64(6)}, rows[1]["unit"])

	out, errOut, code = rflowCmd(t, "--database-url", dbURL, "runs", "show", run.ID.String())
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `pay\s+send\s+completed\s+1\s+\S+\s+tx 0x[0-9a-f]{64} confirmed, value 0\.0292 tETH \(29200000000000000 wei\)`, out)

	out, errOut, code = rflowCmd(t, "--database-url", dbURL, "runs", "show", run.ID.String(), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var detail struct {
		Steps []struct {
			Output map[string]json.RawMessage `json:"output"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &detail), out)
	require.Len(t, detail.Steps, 1)
	require.Equal(t, "29200000000000000", string(detail.Steps[0].Output["value"]), "value stays a JSON number")
	require.Equal(t, `"0.0292 tETH (29200000000000000 wei)"`, string(detail.Steps[0].Output["value_text"]))
	require.Equal(t, units.Native("tETH", 18).Format(bal), strings.Trim(string(detail.Steps[0].Output["value_text"]), `"`))
}

// unitColumns is where each " tETH" of a table line starts.
func unitColumns(line string) []int {
	var at []int
	for i := 0; ; {
		j := strings.Index(line[i:], " tETH")
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + 1
	}
}
