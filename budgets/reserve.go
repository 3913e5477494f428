package budgets

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/units"
	"github.com/rflow-dev/rflow/workflow"
)

// Spend is one send's claim on one budget.
type Spend struct {
	Workflow   string
	Budget     workflow.BudgetRef
	ExternalID string // the send's idempotency key
	Amount     *big.Int
	RunID      uuid.UUID
	StepKey    string
	Attempt    int
}

// ExceededError is a send refused because it would take its budget over
// the cap. Nothing of the send reached the relayer.
type ExceededError struct {
	Budget   string
	Cap      string // as declared, e.g. "5 ether"
	Spent    *big.Int
	Reserved *big.Int
	Amount   *big.Int
	Unit     units.Unit // the budget's, for the message; zero: bare integers
}

func (e *ExceededError) Error() string {
	show := func(v *big.Int) string { return v.String() }
	if e.Unit != (units.Unit{}) {
		show = e.Unit.Format
	}
	return fmt.Sprintf("budget_exceeded: %s cap %s, spent %s, reserved %s, this send %s",
		e.Budget, e.Cap, show(e.Spent), show(e.Reserved), show(e.Amount))
}

// Declare records the budgets of wf (cap and window as now declared), so
// `rflow budgets ls` shows them before anything is spent.
func Declare(ctx context.Context, q store.DBTX, wf *workflow.Workflow) error {
	for _, b := range wf.Budgets {
		if err := store.DeclareBudget(ctx, q, declared(wf.Name, b)); err != nil {
			return err
		}
	}
	return nil
}

func declared(wf string, b workflow.BudgetRef) store.Budget {
	return store.Budget{Workflow: wf, Name: b.Name, Asset: b.Asset, Cap: b.Cap, CapText: b.CapText, Window: b.Window, Unit: b.Unit}
}

// Reserve writes s's reservation in tx, the transaction that hands the
// send to the relayer, after taking the budget's row lock: live
// reservations + settled spend in the window + s.Amount must stay within
// the cap, else it returns an *ExceededError (roll tx back: nothing is
// reserved and nothing is queued). A reservation s's external id already
// holds (a re-run of the same attempt) is kept and not counted twice.
func Reserve(ctx context.Context, tx pgx.Tx, s Spend) error {
	b := s.Budget
	if err := store.DeclareBudget(ctx, tx, declared(s.Workflow, b)); err != nil {
		return err // the row is now locked until tx ends
	}
	_, _, err := store.BudgetReservation(ctx, tx, s.ExternalID, b.Asset)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	reserved, spent, err := store.BudgetTotals(ctx, tx, s.Workflow, b.Name, b.Asset)
	if err != nil {
		return err
	}
	total := new(big.Int).Add(reserved, spent)
	if total.Add(total, s.Amount).Cmp(b.Cap) > 0 {
		return &ExceededError{Budget: b.Name, Cap: capText(b), Spent: spent, Reserved: reserved, Amount: s.Amount,
			Unit: Unit(b.Asset, b.Unit)}
	}
	return store.ReserveBudget(ctx, tx, store.NewReservation{
		ExternalID: s.ExternalID, Workflow: s.Workflow, Budget: b.Name, Asset: b.Asset, Amount: s.Amount,
		RunID: s.RunID, StepKey: s.StepKey, Attempt: s.Attempt,
	})
}

// capText shows the cap as declared and, when that is not already the
// integer, in the budget's unit with the integer too, so it compares with
// the other amounts.
func capText(b workflow.BudgetRef) string {
	full := Unit(b.Asset, b.Unit).Format(b.Cap)
	if b.CapText == "" || b.CapText == b.Cap.String() || b.CapText == units.Grouped(b.Cap, 0) {
		return full
	}
	return fmt.Sprintf("%s = %s", b.CapText, full)
}

// Queued settles a send's reservations as spent: the relayer has it, in the
// same transaction. A queued value is committed spend until the relayer
// proves otherwise.
func Queued(ctx context.Context, tx pgx.Tx, externalID string) error {
	return store.SettleBudget(ctx, tx, externalID, store.BudgetSpent)
}

// Refused releases a send's reservations in the relayer's transaction that
// records a node's refusal proving nothing of the send is in a pool or on
// chain (see relayer.Config.OnRefused): the send goes on (re-signed at the
// node's price, at another nonce), but until its bytes go out again it
// holds nothing, so another send may use the budget meanwhile.
func Refused(ctx context.Context, tx pgx.Tx, externalID string) error {
	return store.SettleBudget(ctx, tx, externalID, store.BudgetReleased)
}

// Reclaim takes back what Refused released, before the relayer sends the
// send's bytes again (relayer.Config.Admit): under the budget's row lock,
// spent + reserved + the send's amount must stay within the cap, else it
// returns an *ExceededError and the send must not go out. It reports
// whether there was anything to take back; a reservation that was never
// released is left as it is, so a send is never counted twice.
func Reclaim(ctx context.Context, tx pgx.Tx, externalID string) (bool, error) {
	rs, err := store.ReleasedBudgets(ctx, tx, externalID)
	if err != nil || len(rs) == 0 {
		return false, err
	}
	for _, r := range rs {
		reserved, spent, err := store.BudgetTotals(ctx, tx, r.Workflow, r.Budget, r.Asset)
		if err != nil {
			return false, err
		}
		total := new(big.Int).Add(reserved, spent)
		if total.Add(total, r.Amount).Cmp(r.Cap) > 0 {
			// The row carries no declared unit: native amounts in ETH,
			// a token's as integers (see Unit).
			b := workflow.BudgetRef{Name: r.Budget, Asset: r.Asset, Cap: r.Cap, CapText: r.CapText}
			return false, &ExceededError{Budget: r.Budget, Cap: capText(b), Spent: spent, Reserved: reserved, Amount: r.Amount,
				Unit: Unit(r.Asset, units.Unit{})}
		}
		if err := store.ReclaimBudget(ctx, tx, externalID, r.Asset); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Finish settles a send's reservations by its final state, inside the
// relayer's transaction: confirmed stays spent; every other end (reverted,
// expired, cancelled, replaced, dropped, refused for lack of funds) moved
// no value and is released, so it never permanently consumes budget.
func Finish(ctx context.Context, tx pgx.Tx, externalID string, confirmed bool) error {
	st := store.BudgetReleased
	if confirmed {
		st = store.BudgetSpent
	}
	return store.SettleBudget(ctx, tx, externalID, st)
}

// Reconcile settles the reservations a crash or an ambiguous failure left
// behind, against the relayer by external id (see store.ReconcileBudgets).
func Reconcile(ctx context.Context, q store.DBTX) (int64, error) {
	return store.ReconcileBudgets(ctx, q)
}

// List returns every budget the project ns declared with its accounting in
// its window.
func List(ctx context.Context, q store.DBTX, ns store.Namespace) ([]store.BudgetUse, error) {
	return store.BudgetUses(ctx, q, ns)
}
