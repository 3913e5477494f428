package budgets_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const erc20ABI = `[
 {"type":"function","name":"transfer","stateMutability":"nonpayable","inputs":[{"name":"to","type":"address"},{"name":"amount","type":"uint256"}],"outputs":[{"type":"bool"}]},
 {"type":"function","name":"transferFrom","stateMutability":"nonpayable","inputs":[{"name":"from","type":"address"},{"name":"to","type":"address"},{"name":"amount","type":"uint256"}],"outputs":[{"type":"bool"}]},
 {"type":"function","name":"approve","stateMutability":"nonpayable","inputs":[{"name":"spender","type":"address"},{"name":"amount","type":"uint256"}],"outputs":[{"type":"bool"}]}]`

// TestAmount: a native budget counts the value; an ERC-20 budget counts the
// amount argument of transfer/transferFrom as encoded in the calldata, and
// refuses any other call.
func TestAmount(t *testing.T) {
	t.Parallel()
	a, err := abi.JSON(strings.NewReader(erc20ABI))
	require.NoError(t, err)
	native := workflow.BudgetRef{Name: "n", Asset: budgets.Native}
	got, err := budgets.Amount(native, &workflow.Send{}, big.NewInt(7), nil)
	require.NoError(t, err)
	require.Equal(t, "7", got.String())

	usdc := workflow.BudgetRef{Name: "u", Asset: "USDC"}
	to, from := common.HexToAddress("0xdEaD"), common.HexToAddress("0xbeef")
	for name, args := range map[string][]any{"transfer": {to, big.NewInt(1234)}, "transferFrom": {from, to, big.NewInt(1234)}} {
		m := a.Methods[name]
		data, err := a.Pack(name, args...)
		require.NoError(t, err)
		got, err := budgets.Amount(usdc, &workflow.Send{Contract: "USDC", Function: name, ABIMethod: &m}, big.NewInt(99), data)
		require.NoError(t, err, name)
		require.Equal(t, "1234", got.String(), name)
	}
	m := a.Methods["approve"]
	data, err := a.Pack("approve", to, big.NewInt(1))
	require.NoError(t, err)
	_, err = budgets.Amount(usdc, &workflow.Send{Contract: "USDC", Function: "approve", ABIMethod: &m}, nil, data)
	require.ErrorContains(t, err, "must call USDC.transfer or USDC.transferFrom")
}

// TestReserveIsIdempotentAndCapped: a second Reserve of one external id is
// one row, not double spend; a reservation over the cap is refused with the
// numbers.
func TestReserveIsIdempotentAndCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	b := workflow.BudgetRef{Name: "petty", Asset: budgets.Native, Cap: big.NewInt(10), CapText: "10", Window: time.Hour}
	reserve := func(id string, amt int64) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return budgets.Reserve(ctx, tx, budgets.Spend{Workflow: "wf", Budget: b, ExternalID: id, Amount: big.NewInt(amt), RunID: uuid.New(), StepKey: "pay", Attempt: 1})
		})
	}
	require.NoError(t, reserve("a", 6))
	require.NoError(t, reserve("a", 6), "the same attempt again")
	err := reserve("b", 5)
	require.EqualError(t, err, "budget_exceeded: petty cap 0.00000000000000001 ETH (10 wei), spent 0 ETH, "+
		"reserved 0.000000000000000006 ETH (6 wei), this send 0.000000000000000005 ETH (5 wei)", "amounts read in the budget's unit")
	require.NoError(t, reserve("c", 4), "exactly up to the cap")
	u := use(t, pool)
	require.Equal(t, "10", u.Reserved.String())
}

// TestReconcile: live reservations settle against the relayer by external
// id: landed is spent, a send that ended without moving value is released,
// one the relayer never saw is released once its step attempt is settled;
// a prematurely released row whose send is in flight is reclaimed as spent.
func TestReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	b := workflow.BudgetRef{Name: "petty", Asset: budgets.Native, Cap: big.NewInt(100), CapText: "100", Window: time.Hour}
	for _, id := range []string{"landed", "reverted", "never", "early"} {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return budgets.Reserve(ctx, tx, budgets.Spend{Workflow: "wf", Budget: b, ExternalID: id, Amount: big.NewInt(10), RunID: uuid.New(), StepKey: "pay", Attempt: 1})
		}))
	}
	relayerTx(t, pool, "landed", "confirmed")
	relayerTx(t, pool, "reverted", "failed")
	relayerTx(t, pool, "early", "in_mempool")
	require.NoError(t, store.SettleBudget(ctx, pool, "early", store.BudgetReleased))

	n, err := budgets.Reconcile(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	want := map[string]store.BudgetStatus{"landed": store.BudgetSpent, "reverted": store.BudgetReleased,
		"never": store.BudgetReleased, "early": store.BudgetSpent}
	for id, st := range want {
		got, _, err := store.BudgetReservation(ctx, pool, id, budgets.Native)
		require.NoError(t, err)
		require.Equal(t, st, got, id)
	}
	n, err = budgets.Reconcile(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, n, "a second pass changes nothing")
	u := use(t, pool)
	require.Equal(t, "20", u.Spent.String())
	require.Equal(t, "0", u.Reserved.String())
}

func use(t *testing.T, pool *pgxpool.Pool) store.BudgetUse {
	t.Helper()
	uses, err := budgets.List(context.Background(), pool)
	require.NoError(t, err)
	require.Len(t, uses, 1)
	return uses[0]
}

// relayerTx records a relayer send for externalID in status, as the
// relayer would have.
func relayerTx(t *testing.T, pool *pgxpool.Pool, externalID, status string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO relayer.transactions (tx_id, external_id, wallet, chain_id, from_address, to_address, status)
VALUES ($1, $2, 'ops', 31337, '0x01', '0x02', $3)`, uuid.New(), externalID, status)
	require.NoError(t, err)
}
