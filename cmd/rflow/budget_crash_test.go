package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/units"
)

const budgetCrashProject = `
name: budgets
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "4 gwei", window: 24h }]
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: %q, value: "${{ gwei(1) }}", budget: petty }
`

// TestCrashBetweenReserveAndSettle kills `rflow start` after a send's budget
// reservation is written and before the relayer call (the second time, so
// one send is already spent), with 4 workers racing. After a restart the
// accounting is exact (spent is what reached the chain, nothing is left
// reserved) and the cap holds: of ten 1 gwei sends under 4 gwei, four
// complete and six are refused.
func TestCrashBetweenReserveAndSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	to := common.HexToAddress("0x00000000000000000000000000000000b0d6e7c4")
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(budgetCrashProject, node.URL, "0x"+anviltest.DevKeys[2], to.Hex())), 0o644))
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()

	const sends = 10
	enqueueManual(t, pool, config, sends)
	startRflowWorkers(t, dbURL, config, jobs.FaultAfterReserve+":2", 4).waitKilled(t, 60*time.Second)
	var live int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.budget_reservations WHERE status = 'reserved'`).Scan(&live))
	require.Zero(t, live, "the killed reservation rolled back with its relayer call")

	p := startRflow(t, dbURL, config, "")
	var runs []*store.Run
	require.Eventually(t, func() bool {
		all, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 100})
		require.NoError(t, err)
		runs = all
		for _, r := range all {
			if !r.Status.Terminal() {
				return false
			}
		}
		return len(all) == sends
	}, 90*time.Second, 100*time.Millisecond, "runs did not all finish")
	p.stop(t)
	var done, refused int
	for _, r := range runs {
		switch r.Status {
		case store.RunCompleted:
			done++
		case store.RunFailed:
			require.Contains(t, *r.Error, "budget_exceeded: petty cap 4 gwei = 0.000000004 ETH (4000000000 wei), spent 0.000000004 ETH (4000000000 wei), reserved 0 ETH, this send 0.000000001 ETH (1000000000 wei)")
			refused++
		}
	}
	require.Equal(t, 4, done)
	require.Equal(t, 6, refused)

	bal, err := node.Client().BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, "4000000000", bal.String(), "the chain received exactly the cap")

	out, errOut, code := rflowCmd(t, "--database-url", dbURL, "budgets", "ls", "-c", config, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rows []budgetRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	eth := units.Ether()
	require.Equal(t, []budgetRow{{Workflow: "pipeline", Name: "petty", Asset: "native", Cap: "4000000000", CapText: "4 gwei",
		Window: "24h0m0s", Reserved: "0", Spent: bal.String(), Remaining: "0", Unit: &eth}}, rows, "spent is the value on chain")
}
