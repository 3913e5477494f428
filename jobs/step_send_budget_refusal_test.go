package jobs_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// refusalProject: workflow pay sends 2 gwei to %[3]s under a 3 gwei cap,
// from wallet a or b (input.wallet): two sends of one budget that share no
// nonces.
const refusalProject = `
name: refusals
networks:
  - { name: local, chain_id: %[4]d, rpc: %[1]q, confirmations: 1 }
wallets:
  - { name: a, private_key: %[2]q }
  - { name: b, private_key: %[5]q }
workflows:
  - name: pay
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "3 gwei", window: 1h }]
    steps:
      - id: from_a
        if: "${{ trigger.input.wallet == 'a' }}"
        send: { wallet: a, network: local, to: %[3]q, value: "${{ gwei(2) }}", budget: petty }
      - id: from_b
        if: "${{ trigger.input.wallet == 'b' }}"
        send: { wallet: b, network: local, to: %[3]q, value: "${{ gwei(2) }}", budget: petty }
`

// refusalBundle starts an engine for refusalProject over rpc, wallets a and
// b being dev keys ka and kb, with the relayer polling every poll.
func refusalBundle(t *testing.T, rpc string, chainID int64, ka, kb int, poll time.Duration) (*testBundle, common.Address) {
	t.Helper()
	to := common.BigToAddress(big.NewInt(int64(0x7ef05e0000 + ka)))
	project := chainProject(t, fmt.Sprintf(refusalProject, rpc, "0x"+anviltest.DevKeys[ka], to.Hex(), chainID, "0x"+anviltest.DevKeys[kb]), nil)
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond, SendPollInterval: poll})
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &testBundle{pool: pool, engine: e, project: project}, to
}

func reservations(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT status FROM rflow.budget_reservations`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out[s]++
	}
	require.NoError(t, rows.Err())
	return out
}

// TestBudgetReleasedWhileTheNodeRefusesTheSend: a node refuses a send's
// bytes for a fee cap below its base fee (geth's words, through a proxy).
// Nothing of the send is in a pool, so its reservation is released in the
// transaction that records the refusal while the relayer keeps the send;
// another send of the budget then fits. When the relayer sends the first
// one's bytes again it takes the reservation back within the cap, and
// here the cap no longer fits it: it is withheld (budget_exceeded), nothing
// of it sent. Before, the refused send held its 2 gwei until its final
// state and the second send failed budget_exceeded.
func TestBudgetReleasedWhileTheNodeRefusesTheSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	proxy := rpcproxy.Start(t, node.URL)
	b, to := refusalBundle(t, proxy.URL, 31337, 1, 2, 3*time.Second)
	_, fromA := anviltest.Key(t, 1)

	proxy.Set(rpcproxy.Faults{Refuse: map[string]string{"eth_sendRawTransaction": "max fee per gas less than block base fee: address " +
		fromA.Hex() + ", maxFeePerGas: 1000000000, baseFee: 2000000000"}})
	first := b.manual(t, "pay", "first", map[string]any{"wallet": "a"})
	require.Eventually(t, func() bool { return proxy.Calls("eth_sendRawTransaction") >= 1 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return reservations(t, b.pool)["released"] == 1 }, 5*time.Second, 10*time.Millisecond,
		"the refusal released the reservation")
	u := budgetUse(t, b.pool, "pay")
	require.Equal(t, "0", u.Spent.String())
	require.Equal(t, "0", u.Reserved.String())
	run, err := store.GetRun(ctx, b.pool, first, false)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingTx, run.Status, "the relayer keeps the send")

	proxy.Set(rpcproxy.Faults{})
	second := b.waitRun(t, b.manual(t, "pay", "second", map[string]any{"wallet": "b"}))
	require.Equal(t, store.RunCompleted, second.Status, "the second send fits what the refusal freed")

	run = b.waitRun(t, first)
	require.Equal(t, store.RunFailed, run.Status)
	require.Contains(t, *run.Error, "budget_exceeded: petty cap 3 gwei = 0.000000003 ETH (3000000000 wei), spent 0.000000002 ETH (2000000000 wei), reserved 0 ETH, this send 0.000000002 ETH (2000000000 wei)")
	bal, err := node.Client().BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, "2000000000", bal.String(), "only the second send moved value")
	n, err := node.Client().NonceAt(ctx, fromA, nil)
	require.NoError(t, err)
	require.Zero(t, n, "nothing of the withheld send was mined")
	u = budgetUse(t, b.pool, "pay")
	require.Equal(t, "2000000000", u.Spent.String())
	require.Equal(t, "0", u.Reserved.String())
	require.Equal(t, map[string]int{"spent": 1, "released": 1}, reservations(t, b.pool))
}

// TestBudgetKeptWhileTheRefusalIsAmbiguous: refusals that do not prove the
// send is nowhere (a timeout, a dropped connection, "nonce too low", which
// the send's own bytes may have caused) keep its reservation: the budget
// stays counted and a second send that would overshoot it is refused.
func TestBudgetKeptWhileTheRefusalIsAmbiguous(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	proxy := rpcproxy.Start(t, node.URL)
	b, _ := refusalBundle(t, proxy.URL, 31337, 1, 2, 200*time.Millisecond)
	for i, msg := range []string{"request timed out", "nonce too low: next nonce 1, tx nonce 0"} {
		proxy.Set(rpcproxy.Faults{Refuse: map[string]string{"eth_sendRawTransaction": msg}})
		before := proxy.Calls("eth_sendRawTransaction")
		id := b.manual(t, "pay", fmt.Sprint("ambiguous-", i), map[string]any{"wallet": "a"})
		require.Eventually(t, func() bool { return proxy.Calls("eth_sendRawTransaction") >= before+3 }, 20*time.Second, 10*time.Millisecond)
		require.Equal(t, map[string]int{"spent": 1}, reservations(t, b.pool), msg)
		over := b.waitRun(t, b.manual(t, "pay", fmt.Sprint("over-", i), map[string]any{"wallet": "b"}))
		require.Equal(t, store.RunFailed, over.Status, msg)
		require.Contains(t, *over.Error, "budget_exceeded", msg)
		proxy.Set(rpcproxy.Faults{})
		require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status, msg)
		require.NoError(t, pgxExec(b.pool, `DELETE FROM rflow.budget_reservations`))
	}
}

// TestBudgetReleasedWhenTheWalletCannotPay: a wallet with too little ETH
// for gas is refused by the node for lack of funds: the send fails at once
// and its reservation is released in the same transaction, so once the
// wallet is funded a send within the cap fits.
func TestBudgetReleasedWhenTheWalletCannotPay(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	_, fromA := anviltest.Key(t, 1)
	node.Call(nil, "anvil_setBalance", fromA, "0x2540BE400") // 10 gwei: the value, not the gas
	b, _ := refusalBundle(t, node.URL, 31337, 1, 2, 200*time.Millisecond)
	run := b.waitRun(t, b.manual(t, "pay", "poor", map[string]any{"wallet": "a"}))
	require.Equal(t, store.RunFailed, run.Status)
	require.Contains(t, *run.Error, "insufficient funds")
	require.Equal(t, map[string]int{"released": 1}, reservations(t, b.pool))
	node.Call(nil, "anvil_setBalance", fromA, "0xde0b6b3a7640000")
	require.Equal(t, store.RunCompleted, b.waitRun(t, b.manual(t, "pay", "funded", map[string]any{"wallet": "a"})).Status)
	require.Equal(t, "2000000000", budgetUse(t, b.pool, "pay").Spent.String())
}

func pgxExec(pool *pgxpool.Pool, sql string) error {
	_, err := pool.Exec(context.Background(), sql)
	return err
}

// TestBudgetCountedOnceAcrossAReSignAtTheNodesMinimum: geth raises its
// pool's minimum tip (miner_setGasPrice) above what its own oracle
// suggests, so the first broadcast is refused in geth's words with the
// minimum stated ("gas tip cap 1000000000, minimum needed 5000000000") and
// the relayer re-signs at it. The refusal released the reservation and
// the re-signed bytes took the same one back: one reservation, spent once,
// and the budget still refuses a send it cannot fit.
func TestBudgetCountedOnceAcrossAReSignAtTheNodesMinimum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := gethtest.Start(t, gethtest.Options{Args: []string{"--http.api", "eth,net,web3,debug,txpool,admin,miner"}})
	node.Call(nil, "miner_setGasPrice", "0x12a05f200") // 5 gwei
	b, to := refusalBundle(t, node.URL, gethtest.ChainID, 1, 2, 200*time.Millisecond)
	run := b.waitRun(t, b.manual(t, "pay", "tip", map[string]any{"wallet": "a"}))
	require.Equal(t, store.RunCompleted, run.Status, "%v", run.Error)
	var refused, sent int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE sent_at IS NULL), count(*) FILTER (WHERE sent_at IS NOT NULL)
		FROM relayer.broadcasts`).Scan(&refused, &sent))
	require.Equal(t, 1, refused, "the first bytes were refused for their tip")
	require.Equal(t, 1, sent, "and re-signed once")
	require.Equal(t, map[string]int{"spent": 1}, reservations(t, b.pool))
	u := budgetUse(t, b.pool, "pay")
	require.Equal(t, "2000000000", u.Spent.String())
	require.Equal(t, "0", u.Reserved.String())
	bal, err := node.Client().BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, "2000000000", bal.String())
	over := b.waitRun(t, b.manual(t, "pay", "over", map[string]any{"wallet": "b"}))
	require.Equal(t, store.RunFailed, over.Status)
	require.Contains(t, *over.Error, "budget_exceeded", "the budget still counts the re-signed send")
}
