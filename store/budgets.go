package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/units"
)

// BudgetStatus is a budget reservation's state.
type BudgetStatus string

// Reservation states. Reserved and spent count against the cap; released
// does not.
const (
	BudgetReserved BudgetStatus = "reserved" // written before the send; outcome not yet known
	BudgetSpent    BudgetStatus = "spent"    // the send reached the relayer (or landed)
	BudgetReleased BudgetStatus = "released" // the send provably moved no value
)

// Budget is a declared budget of a deployed workflow.
type Budget struct {
	Workflow string
	Name     string
	Asset    string
	Cap      *big.Int
	CapText  string
	Window   time.Duration
	// Unit is what the budget's amounts are shown in; the zero Unit when
	// the row predates units (migration 045) and was not deployed since.
	Unit units.Unit
}

// DeclareBudget records a budget's current cap and window, and locks its
// row until tx ends: the per-(budget, asset) lock under which a send checks
// the cap.
func DeclareBudget(ctx context.Context, q DBTX, b Budget) error {
	_, err := q.Exec(ctx, `
INSERT INTO rflow.budgets (workflow_name, name, asset, cap, cap_text, span, unit)
VALUES ($1, $2, $3, $4::numeric, $5, make_interval(secs => $6), $7)
ON CONFLICT (workflow_name, name, asset) DO UPDATE
SET cap = EXCLUDED.cap, cap_text = EXCLUDED.cap_text, span = EXCLUDED.span, unit = EXCLUDED.unit, updated_at = now()`,
		b.Workflow, b.Name, b.Asset, numeric(b.Cap), b.CapText, b.Window.Seconds(), unitJSON(b.Unit))
	if err != nil {
		return fmt.Errorf("declare budget %s/%s: %w", b.Workflow, b.Name, err)
	}
	return nil
}

// BudgetUse is a budget's accounting inside its window.
type BudgetUse struct {
	Budget
	Reserved *big.Int
	Spent    *big.Int
}

// BudgetTotals returns the live reservations and the settled spend of b
// inside its rolling window.
func BudgetTotals(ctx context.Context, q DBTX, workflowName, name, asset string) (reserved, spent *big.Int, err error) {
	var r, s string
	err = q.QueryRow(ctx, `
SELECT coalesce(sum(r.amount) FILTER (WHERE r.status = 'reserved'), 0)::text,
       coalesce(sum(r.amount) FILTER (WHERE r.status = 'spent'), 0)::text
FROM rflow.budgets b
JOIN rflow.budget_reservations r ON (r.workflow_name, r.budget, r.asset) = (b.workflow_name, b.name, b.asset)
WHERE (b.workflow_name, b.name, b.asset) = ($1, $2, $3)
  AND r.status <> 'released' AND r.reserved_at > now() - b.span`, workflowName, name, asset).Scan(&r, &s)
	if err != nil {
		return nil, nil, fmt.Errorf("budget %s/%s totals: %w", workflowName, name, err)
	}
	reserved, _ = new(big.Int).SetString(r, 10)
	spent, _ = new(big.Int).SetString(s, 10)
	return reserved, spent, nil
}

// NewReservation is what ReserveBudget inserts.
type NewReservation struct {
	ExternalID string
	Workflow   string
	Budget     string
	Asset      string
	Amount     *big.Int
	RunID      uuid.UUID
	StepKey    string
	Attempt    int
}

// BudgetReservation returns the reservation of externalID for asset, or
// ErrNotFound.
func BudgetReservation(ctx context.Context, q DBTX, externalID, asset string) (BudgetStatus, *big.Int, error) {
	var st, amt string
	err := q.QueryRow(ctx, `SELECT status, amount::text FROM rflow.budget_reservations WHERE external_id = $1 AND asset = $2`,
		externalID, asset).Scan(&st, &amt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, ErrNotFound
	}
	if err != nil {
		return "", nil, fmt.Errorf("budget reservation %s: %w", externalID, err)
	}
	a, _ := new(big.Int).SetString(amt, 10)
	return BudgetStatus(st), a, nil
}

// ReserveBudget writes a reserved row for a send; a row already there (a
// re-run of the same attempt) is kept as it is.
func ReserveBudget(ctx context.Context, q DBTX, n NewReservation) error {
	_, err := q.Exec(ctx, `
INSERT INTO rflow.budget_reservations (external_id, asset, workflow_name, budget, amount, run_id, step_key, attempt)
VALUES ($1, $2, $3, $4, $5::numeric, $6, $7, $8)
ON CONFLICT (external_id, asset) DO NOTHING`,
		n.ExternalID, n.Asset, n.Workflow, n.Budget, numeric(n.Amount), n.RunID, n.StepKey, n.Attempt)
	if err != nil {
		return fmt.Errorf("reserve budget %s for %s: %w", n.Budget, n.ExternalID, err)
	}
	return nil
}

// SettleBudget moves every reservation of a send to st.
func SettleBudget(ctx context.Context, q DBTX, externalID string, st BudgetStatus) error {
	_, err := q.Exec(ctx, `
UPDATE rflow.budget_reservations SET status = $2, settled_at = now()
WHERE external_id = $1 AND status <> $2`, externalID, string(st))
	if err != nil {
		return fmt.Errorf("settle budget of %s: %w", externalID, err)
	}
	return nil
}

// ReleasedReservation is a send's released reservation with its budget's
// cap, as ReleasedBudgets locks it.
type ReleasedReservation struct {
	Workflow, Budget, Asset string
	Amount, Cap             *big.Int
	CapText                 string
}

// ReleasedBudgets returns the released reservations of externalID, each
// with its budget's row locked until tx ends (the lock Reserve takes), by
// asset.
func ReleasedBudgets(ctx context.Context, tx pgx.Tx, externalID string) ([]ReleasedReservation, error) {
	rows, err := tx.Query(ctx, `
SELECT r.workflow_name, r.budget, r.asset, r.amount::text, b.cap::text, b.cap_text
FROM rflow.budget_reservations r
JOIN rflow.budgets b ON (b.workflow_name, b.name, b.asset) = (r.workflow_name, r.budget, r.asset)
WHERE r.external_id = $1 AND r.status = 'released'
ORDER BY r.asset
FOR UPDATE OF b, r`, externalID)
	if err != nil {
		return nil, fmt.Errorf("released budgets of %s: %w", externalID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReleasedReservation, error) {
		var r ReleasedReservation
		var amt, capS string
		if err := row.Scan(&r.Workflow, &r.Budget, &r.Asset, &amt, &capS, &r.CapText); err != nil {
			return r, err
		}
		r.Amount, _ = new(big.Int).SetString(amt, 10)
		r.Cap, _ = new(big.Int).SetString(capS, 10)
		return r, nil
	})
}

// ReclaimBudget moves a send's released reservation of asset back to
// spent, counted from now in its window: the send is about to reach a
// node again.
func ReclaimBudget(ctx context.Context, tx pgx.Tx, externalID, asset string) error {
	_, err := tx.Exec(ctx, `
UPDATE rflow.budget_reservations SET status = 'spent', reserved_at = now(), settled_at = now()
WHERE external_id = $1 AND asset = $2 AND status = 'released'`, externalID, asset)
	if err != nil {
		return fmt.Errorf("reclaim budget of %s: %w", externalID, err)
	}
	return nil
}

// ReconcileBudgets settles reservations against the relayer, by external
// id, inside their budget's window: a send the relayer holds that landed or
// is still in flight is spent (even a row released too early), one that
// ended without moving value is released; a reserved row the relayer never
// saw is released once its step attempt is settled (it can no longer
// reach the relayer). It returns how many rows changed.
func ReconcileBudgets(ctx context.Context, q DBTX) (int64, error) {
	tag, err := q.Exec(ctx, `
WITH judged AS (
    SELECT r.external_id, r.asset, r.status,
        CASE
            WHEN t.status IN ('failed', 'expired', 'cancelled', 'replaced', 'dropped', 'simulated') THEN 'released'
            WHEN t.status IS NOT NULL THEN 'spent'
            WHEN r.status = 'reserved' AND (s.run_id IS NULL OR s.attempt > r.attempt
                OR s.status IN ('completed', 'failed', 'cancelled', 'skipped', 'retrying')) THEN 'released'
            ELSE r.status
        END AS verdict
    FROM rflow.budget_reservations r
    JOIN rflow.budgets b ON (b.workflow_name, b.name, b.asset) = (r.workflow_name, r.budget, r.asset)
    LEFT JOIN relayer.transactions t ON t.external_id = r.external_id
    LEFT JOIN rflow.step_runs s ON s.run_id = r.run_id AND s.step_key = r.step_key
    WHERE r.reserved_at > now() - b.span
)
UPDATE rflow.budget_reservations r SET status = j.verdict, settled_at = now()
FROM judged j
WHERE (r.external_id, r.asset) = (j.external_id, j.asset) AND j.verdict <> j.status`)
	if err != nil {
		return 0, fmt.Errorf("reconcile budgets: %w", err)
	}
	return tag.RowsAffected(), nil
}

// BudgetUses lists every budget ns (and its rehearsals) declared with its
// accounting inside its window, by workflow (its local name) and name.
func BudgetUses(ctx context.Context, q DBTX, ns Namespace) ([]BudgetUse, error) {
	rows, err := q.Query(ctx, `
SELECT b.workflow_name, b.name, b.asset, b.cap::text, b.cap_text, extract(epoch FROM b.span)::float8, b.unit,
    coalesce(sum(r.amount) FILTER (WHERE r.status = 'reserved'), 0)::text,
    coalesce(sum(r.amount) FILTER (WHERE r.status = 'spent'), 0)::text
FROM rflow.budgets b
LEFT JOIN rflow.budget_reservations r ON (r.workflow_name, r.budget, r.asset) = (b.workflow_name, b.name, b.asset)
    AND r.status <> 'released' AND r.reserved_at > now() - b.span
WHERE `+ns.filterWithRehearsals("b.workflow_name")+`
GROUP BY b.workflow_name, b.name, b.asset
ORDER BY b.workflow_name, b.name, b.asset`)
	if err != nil {
		return nil, fmt.Errorf("list budgets: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (BudgetUse, error) {
		var u BudgetUse
		var capS, res, spent string
		var secs float64
		var unit []byte
		if err := row.Scan(&u.Workflow, &u.Name, &u.Asset, &capS, &u.CapText, &secs, &unit, &res, &spent); err != nil {
			return u, err
		}
		u.Workflow, _ = ns.Local(u.Workflow)
		if len(unit) > 0 {
			// A row this version did not write shows in the default unit.
			_ = json.Unmarshal(unit, &u.Unit)
		}
		u.Window = time.Duration(secs * float64(time.Second))
		u.Cap, _ = new(big.Int).SetString(capS, 10)
		u.Reserved, _ = new(big.Int).SetString(res, 10)
		u.Spent, _ = new(big.Int).SetString(spent, 10)
		return u, nil
	})
}

// unitJSON is a budget's unit column: NULL for the zero Unit (nothing
// declared it).
func unitJSON(u units.Unit) []byte {
	if u == (units.Unit{}) {
		return nil
	}
	b, _ := json.Marshal(u)
	return b
}
