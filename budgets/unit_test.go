package budgets_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/units"
	"github.com/rflow-dev/rflow/workflow"
)

// TestBudgetUnitIsStored: the unit a budget is declared with comes back
// from the database (budgets ls reads nothing else), and an over-cap
// token send is refused with the amounts in the token's unit.
func TestBudgetUnitIsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	usdc := units.Token("USDC", 6)
	b := workflow.BudgetRef{Name: "payouts", Asset: "Token", Cap: big.NewInt(1_000_000_000), CapText: "1000000000", Window: time.Hour, Unit: usdc}
	reserve := func(id string, amt int64) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return budgets.Reserve(ctx, tx, budgets.Spend{Workflow: "wf", Budget: b, ExternalID: id, Amount: big.NewInt(amt), RunID: uuid.New(), StepKey: "pay", Attempt: 1})
		})
	}
	require.NoError(t, reserve("a", 999_500_000))
	require.EqualError(t, reserve("b", 1_000_000), "budget_exceeded: payouts cap 1,000 USDC (1000000000), spent 0 USDC, "+
		"reserved 999.5 USDC (999500000), this send 1 USDC (1000000)")
	require.Equal(t, usdc, use(t, pool).Unit)
}

func TestUnitDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, units.Ether(), budgets.Unit(budgets.Native, units.Unit{}), "a row from before units: ETH")
	require.Equal(t, units.Unknown("Token"), budgets.Unit("Token", units.Unit{}), "a token row from before units: raw integers")
	require.Equal(t, units.Native("POL", 18), budgets.Unit(budgets.Native, units.Native("POL", 18)))
}
