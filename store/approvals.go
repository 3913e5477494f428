package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ApprovalStatus is where an approval gate stands (rflow.approvals.status).
type ApprovalStatus string

// Approval statuses. Pending is the only open one; a gate moves from it
// exactly once.
const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalApproved  ApprovalStatus = "approved"
	ApprovalRejected  ApprovalStatus = "rejected"
	ApprovalExpired   ApprovalStatus = "expired"
	ApprovalCancelled ApprovalStatus = "cancelled"
)

// ApprovalStatuses lists every approval status.
func ApprovalStatuses() []ApprovalStatus {
	return []ApprovalStatus{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalCancelled}
}

// Valid reports whether s is one of ApprovalStatuses.
func (s ApprovalStatus) Valid() bool {
	for _, v := range ApprovalStatuses() {
		if s == v {
			return true
		}
	}
	return false
}

// Approval is the gate of one attempt of an approval-gated send: the row a
// run waiting_approval is parked on.
type Approval struct {
	ID       uuid.UUID
	RunID    uuid.UUID
	StepKey  string
	Attempt  int
	Workflow string
	StepID   string
	Status   ApprovalStatus
	// Summary is the prepared transaction (jobs.ApprovalSummary as JSON).
	Summary   json.RawMessage
	OnTimeout string
	ExpiresAt time.Time
	CreatedAt time.Time
	DecidedAt *time.Time
	DecidedBy *string
	Reason    *string
}

const approvalColumns = `id, run_id, step_key, attempt, workflow_name, step_id, status, summary, on_timeout,
	expires_at, created_at, decided_at, decided_by, reason`

func scanApproval(row pgx.Row) (*Approval, error) {
	var a Approval
	err := row.Scan(&a.ID, &a.RunID, &a.StepKey, &a.Attempt, &a.Workflow, &a.StepID, &a.Status, &a.Summary, &a.OnTimeout,
		&a.ExpiresAt, &a.CreatedAt, &a.DecidedAt, &a.DecidedBy, &a.Reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return &a, err
}

func collectApprovals(rows pgx.Rows, err error) ([]*Approval, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Approval, error) { return scanApproval(r) })
}

// CreateApproval opens the gate of a send attempt, or returns the one
// already open for it (a job re-run after a crash finds its own row):
// created reports which.
func CreateApproval(ctx context.Context, tx pgx.Tx, a Approval) (*Approval, bool, error) {
	got, err := scanApproval(tx.QueryRow(ctx, `
		INSERT INTO rflow.approvals (id, run_id, step_key, attempt, workflow_name, step_id, summary, on_timeout, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (run_id, step_key, attempt) DO NOTHING
		RETURNING `+approvalColumns,
		a.ID, a.RunID, a.StepKey, a.Attempt, a.Workflow, a.StepID, []byte(a.Summary), a.OnTimeout, a.ExpiresAt))
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, false, fmt.Errorf("open approval for %s of run %s: %w", a.StepKey, a.RunID, err)
	}
	got, err = ApprovalFor(ctx, tx, a.RunID, a.StepKey, a.Attempt)
	return got, false, err
}

// ApprovalFor returns the gate of one send attempt, or ErrNotFound.
func ApprovalFor(ctx context.Context, db DBTX, runID uuid.UUID, key string, attempt int) (*Approval, error) {
	a, err := scanApproval(db.QueryRow(ctx, `SELECT `+approvalColumns+` FROM rflow.approvals
		WHERE run_id = $1 AND step_key = $2 AND attempt = $3`, runID, key, attempt))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("approval for %s of run %s: %w", key, runID, err)
	}
	return a, err
}

// GetApproval returns one approval; lock takes its row for the
// transaction, so two decisions on one gate are serialised.
func GetApproval(ctx context.Context, db DBTX, id uuid.UUID, lock bool) (*Approval, error) {
	q := `SELECT ` + approvalColumns + ` FROM rflow.approvals WHERE id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	a, err := scanApproval(db.QueryRow(ctx, q, id))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("approval %s: %w", id, err)
	}
	return a, nil
}

// ApprovalsByShortID returns the approvals (at most limit, newest first)
// whose id ends in short, a ShortIDLen-digit short id.
func ApprovalsByShortID(ctx context.Context, db DBTX, short string, limit int) ([]*Approval, error) {
	out, err := collectApprovals(db.Query(ctx, `SELECT `+approvalColumns+` FROM rflow.approvals
		WHERE right(id::text, 8) = lower($1) ORDER BY created_at DESC, id DESC LIMIT $2`, short, limit))
	if err != nil {
		return nil, fmt.Errorf("find approval %s: %w", short, err)
	}
	return out, nil
}

// AmbiguousShortIDError is a short id that matches more than one
// approval: the caller must give the full id.
type AmbiguousShortIDError struct {
	Short   string
	Matches []*Approval
}

func (e *AmbiguousShortIDError) Error() string {
	return fmt.Sprintf("short id %s matches %d approvals; give the full id", e.Short, len(e.Matches))
}

// ApprovalByRef finds an approval by its id or its short id (the last
// ShortIDLen hex digits, as notices and listings print it).
func ApprovalByRef(ctx context.Context, db DBTX, ref string) (*Approval, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return GetApproval(ctx, db, id, false)
	}
	if !IsShortID(ref) {
		return nil, fmt.Errorf("%q is not an approval id (a UUID, or its %d-character short id): %w", ref, ShortIDLen, ErrNotFound)
	}
	const shown = 10
	aps, err := ApprovalsByShortID(ctx, db, ref, shown+1)
	switch {
	case err != nil:
		return nil, err
	case len(aps) == 0:
		return nil, fmt.Errorf("no approval has the short id %s: %w", ref, ErrNotFound)
	case len(aps) > 1:
		return nil, &AmbiguousShortIDError{Short: ref, Matches: aps}
	}
	return aps[0], nil
}

// IsShortID reports whether s has the form of a short id.
func IsShortID(s string) bool {
	if len(s) != ShortIDLen {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// ApprovalFilter selects approvals to list; zero fields select all.
type ApprovalFilter struct {
	Status   ApprovalStatus
	Workflow string
	RunID    uuid.UUID
	Limit    int
	// Rehearsals includes the gates of replays and tests, which are hidden
	// (like their runs) unless asked for here or named by Workflow or RunID.
	Rehearsals bool
	// Namespace is the project whose gates are listed (Workflow is one of
	// its local names), under its local workflow names.
	Namespace Namespace
}

// ListApprovals returns approvals, newest first.
func ListApprovals(ctx context.Context, db DBTX, f ApprovalFilter) ([]*Approval, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	live := "true" // one run's gates: its reader checked the run is its project's
	switch {
	case f.RunID != uuid.Nil:
	case f.Workflow == "" && !f.Rehearsals:
		live = f.Namespace.filter("workflow_name")
	default:
		live = f.Namespace.filterWithRehearsals("workflow_name")
	}
	if f.Workflow != "" && !IsRehearsal(f.Workflow) {
		f.Workflow = f.Namespace.Qualify(f.Workflow)
	}
	out, err := collectApprovals(db.Query(ctx, `SELECT `+approvalColumns+` FROM rflow.approvals
		WHERE ($1 = '' OR status = $1) AND ($2 = '' OR workflow_name = $2) AND ($3::uuid IS NULL OR run_id = $3) AND `+live+`
		ORDER BY created_at DESC, id DESC LIMIT $4`,
		string(f.Status), f.Workflow, nullUUID(f.RunID), limit))
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	for _, ap := range out {
		if f.RunID != uuid.Nil && !IsRehearsal(ap.Workflow) {
			_, ap.Workflow = ProjectOf(ap.Workflow)
			continue
		}
		ap.Workflow, _ = f.Namespace.Local(ap.Workflow)
	}
	return out, nil
}

// DecideApproval settles a pending gate as status (approved, rejected,
// expired or cancelled), recording who, when and why. It returns the row
// as it now is and whether this call settled it: a gate already settled is
// left untouched, so the caller can tell a repeat from a conflict.
func DecideApproval(ctx context.Context, tx pgx.Tx, id uuid.UUID, status ApprovalStatus, by, reason string) (*Approval, bool, error) {
	a, err := scanApproval(tx.QueryRow(ctx, `
		UPDATE rflow.approvals SET status = $2, decided_at = now(), decided_by = NULLIF($3, ''), reason = NULLIF($4, '')
		WHERE id = $1 AND status = 'pending'
		RETURNING `+approvalColumns, id, string(status), by, reason))
	if err == nil {
		return a, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	a, err = GetApproval(ctx, tx, id, false)
	return a, false, err
}

// CancelRunApprovals settles the pending gates of a run that is being
// cancelled: nobody can approve them any more.
func CancelRunApprovals(ctx context.Context, tx pgx.Tx, runID uuid.UUID, by string) (int64, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.approvals SET status = 'cancelled', decided_at = now(), decided_by = NULLIF($2, ''), reason = 'run cancelled'
		WHERE run_id = $1 AND status = 'pending'`, runID, by)
	if err != nil {
		return 0, fmt.Errorf("cancel approvals of run %s: %w", runID, err)
	}
	return tag.RowsAffected(), nil
}

// ApprovalDecision is an operator's answer to an approval gate.
type ApprovalDecision struct {
	Approve bool
	By      string // who decided: recorded and shown by runs show
	Reason  string
}

// ApprovalConflictError is a decision a gate cannot take: it was decided
// otherwise, it expired, or its run no longer waits for it. The CLI exits 1
// and the API answers 409 with it.
type ApprovalConflictError struct {
	Approval *Approval
	Msg      string
}

func (e *ApprovalConflictError) Error() string { return e.Msg }

func nullUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}
