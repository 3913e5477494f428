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
	"github.com/rflow-dev/rflow/chain/gethtest"
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

const budgetRefusalProject = `
name: budgets
networks:
  - { name: geth, chain_id: 1337, rpc: %q, confirmations: 1 }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "3 gwei", window: 24h }]
    steps:
      - id: pay
        send: { wallet: ops, to: %q, value: "${{ gwei(2) }}", budget: petty }
`

// TestCrashAfterARefusalReleasedTheBudget: geth takes a tip of at least
// 1000 wei and suggests 1, so the first broadcast is refused with the
// minimum stated. The refusal releases the send's reservation in the
// transaction that records it, durably: `rflow start` is killed right
// after, before the bytes re-signed at the minimum go out, and the
// reservation is found released. After a restart the send confirms once
// and is counted once: spent is the value on chain, nothing is left
// reserved, and a second send the cap cannot fit is refused.
func TestCrashAfterARefusalReleasedTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := gethtest.Start(t, gethtest.Options{Args: []string{"--http.api", "eth,net,web3,debug,txpool,admin,miner"}})
	var ok bool
	node.Call(&ok, "miner_setGasPrice", "0x3e8")
	require.True(t, ok)
	to := common.HexToAddress("0x00000000000000000000000000000000b0d6e7c5")
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(budgetRefusalProject, node.URL, "0x"+anviltest.DevKeys[4], to.Hex())), 0o644))
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()

	enqueueManual(t, pool, config, 1)
	startRflow(t, dbURL, config, "relayer.before-resend-at-minimum").waitKilled(t, 60*time.Second)
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM rflow.budget_reservations`).Scan(&status))
	require.Equal(t, "released", status, "the refusal released the reservation with its record")
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM relayer.transactions`).Scan(&status))
	require.Equal(t, "pending", status, "the send goes on")

	p := startRflow(t, dbURL, config, "")
	require.Eventually(t, func() bool {
		runs, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 10})
		require.NoError(t, err)
		return len(runs) == 1 && runs[0].Status == store.RunCompleted
	}, 90*time.Second, 100*time.Millisecond, "the send never confirmed; rflow:\n%s", p.out)
	bal, err := node.Client().BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, "2000000000", bal.String(), "one transaction")
	enqueueManualKeys(t, pool, config, "over", 1)
	require.Eventually(t, func() bool {
		runs, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 10, Status: store.RunFailed})
		require.NoError(t, err)
		return len(runs) == 1 && strings.Contains(*runs[0].Error, "budget_exceeded: petty cap 3 gwei = 0.000000003 ETH (3000000000 wei), spent 0.000000002 ETH (2000000000 wei), reserved 0 ETH")
	}, 60*time.Second, 100*time.Millisecond, "the cap counts the send once; rflow:\n%s", p.out)
	p.stop(t)

	out, errOut, code := rflowCmd(t, "--database-url", dbURL, "budgets", "ls", "-c", config, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rows []budgetRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 1)
	require.Equal(t, "2000000000", rows[0].Spent, "spent is the value on chain")
	require.Equal(t, "0", rows[0].Reserved)
}
