package jobs_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// budgetProject: workflow pay sends 1 gwei to %[3]s under a 3 gwei cap;
// workflow refund calls the non-payable Vault.refund with 2 gwei under a
// 3 gwei cap, which reverts.
const budgetProject = `
name: budgets
networks:
  - { name: local, chain_id: 31337, rpc: %[1]q, confirmations: 1 }
wallets:
  - { name: ops, private_key: "${OPS_KEY}" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %[2]q }
workflows:
  - name: pay
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "3 gwei", window: 1h }]
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: %[3]q, value: "${{ gwei(1) }}", budget: petty }
  - name: refund
    trigger: { manual: {} }
    budgets: [{ name: small, asset: native, cap: "3 gwei", window: 1h }]
    steps:
      - id: refund
        send: { wallet: ops, network: local, contract: Vault, function: refund, args: [%[3]q, 1], value: "${{ gwei(2) }}", budget: small }
`

func budgetBundle(t *testing.T, key int) (*testBundle, *anviltest.Node, common.Address) {
	t.Helper()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	to := common.BigToAddress(big.NewInt(int64(0xb0d6e7000 + key)))
	project := chainProject(t, fmt.Sprintf(budgetProject, node.URL, em.Address.Hex(), to.Hex()), func(k string) (string, bool) {
		if k == "OPS_KEY" {
			return anviltest.DevKeys[key], true
		}
		return os.LookupEnv(k)
	})
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngine(t, pool, url, project)
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &testBundle{pool: pool, engine: e, project: project}, node, to
}

func budgetUse(t *testing.T, pool *pgxpool.Pool, wf string) store.BudgetUse {
	t.Helper()
	uses, err := budgets.List(context.Background(), pool)
	require.NoError(t, err)
	for _, u := range uses {
		if u.Workflow == wf {
			return u
		}
	}
	t.Fatalf("budget of %s not listed in %v", wf, uses)
	return store.BudgetUse{}
}

// TestBudgetRaceNeverOvershoots: 20 sends of 1 gwei race one 3 gwei cap.
// Exactly 3 complete, the other 17 fail budget_exceeded without reaching
// the relayer, and the chain received exactly the cap. (Without the
// budget's row lock, 4 to 6 of them went out here.)
func TestBudgetRaceNeverOvershoots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, node, to := budgetBundle(t, 2)
	require.Equal(t, "3000000000", budgetUse(t, b.pool, "pay").Cap.String(), "deploy declares the budget")

	const n = 20
	ids := make(chan [16]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids <- b.manual(t, "pay", fmt.Sprint("race-", i), nil) })
	}
	wg.Wait()
	close(ids)
	var done, refused int
	for id := range ids {
		run := b.waitRun(t, id)
		switch run.Status {
		case store.RunCompleted:
			done++
		case store.RunFailed:
			require.Contains(t, *run.Error, "budget_exceeded: petty cap 3 gwei = 0.000000003 ETH (3000000000 wei), spent ")
			require.True(t, strings.HasSuffix(*run.Error, "this send 0.000000001 ETH (1000000000 wei)"), *run.Error)
			refused++
		default:
			t.Fatalf("run %x ended %s", id, run.Status)
		}
	}
	require.Equal(t, 3, done, "floor(cap/amount) sends complete")
	require.Equal(t, n-3, refused)

	bal, err := node.Client().BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, "3000000000", bal.String(), "the chain received exactly the cap")
	var queued int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions`).Scan(&queued))
	require.Equal(t, 3, queued, "refused sends never reached the relayer")
	u := budgetUse(t, b.pool, "pay")
	require.Equal(t, "3000000000", u.Spent.String())
	require.Equal(t, "0", u.Reserved.String())
}

// TestBudgetReleasedWhenTheSendFails: a send that reverts moved no value,
// so its reservation is released and the budget is whole again.
func TestBudgetReleasedWhenTheSendFails(t *testing.T) {
	t.Parallel()
	b, _, _ := budgetBundle(t, 3)
	for i := range 2 { // two 2 gwei sends under 3 gwei: the second fits only if the first was released
		run := b.waitRun(t, b.manual(t, "refund", fmt.Sprint("revert-", i), nil))
		require.Equal(t, store.RunFailed, run.Status)
		require.NotContains(t, *run.Error, "budget_exceeded")
	}
	var released int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM rflow.budget_reservations WHERE status = 'released'`).Scan(&released))
	require.Equal(t, 2, released)
	u := budgetUse(t, b.pool, "refund")
	require.Equal(t, "0", u.Spent.String())
	require.Equal(t, "0", u.Reserved.String())
}
