package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/trigger"
)

// RunStatus is where a run stands (the workflow_runs.status column).
type RunStatus string

// Run statuses.
const (
	RunQueued RunStatus = "queued"
	// RunThrottled is a claimed run that a throttle or rate_limit holds
	// (no job) until its window frees; see store/guards.go.
	RunThrottled       RunStatus = "throttled"
	RunRunning         RunStatus = "running"
	RunWaitingDelay    RunStatus = "waiting_delay"
	RunWaitingTx       RunStatus = "waiting_tx"
	RunWaitingEvent    RunStatus = "waiting_event"
	RunWaitingApproval RunStatus = "waiting_approval"
	RunCompleted       RunStatus = "completed"
	RunFailed          RunStatus = "failed"
	RunCancelled       RunStatus = "cancelled"

	// RunPending and RunReincluded are statuses of on_reorg responses
	// only (rflow.reorg_runs): waiting for the fork to reach the network's
	// depth, and ended because the log came back in the canonical chain.
	RunPending    RunStatus = "pending"
	RunReincluded RunStatus = "reincluded"
)

// RunStatuses lists every run status, in lifecycle order.
func RunStatuses() []RunStatus {
	return []RunStatus{RunQueued, RunThrottled, RunRunning, RunWaitingDelay, RunWaitingTx, RunWaitingEvent, RunWaitingApproval,
		RunCompleted, RunFailed, RunCancelled}
}

// Valid reports whether s is one of RunStatuses.
func (s RunStatus) Valid() bool { return slices.Contains(RunStatuses(), s) }

// Terminal reports whether a run in status s can no longer change (short
// of an operator's retry of a failed run).
func (s RunStatus) Terminal() bool {
	return s == RunCompleted || s == RunFailed || s == RunCancelled || s == RunReincluded
}

// Waiting reports whether a run in status s is parked on something outside
// itself (a delay, a transaction, an event, an approval).
func (s RunStatus) Waiting() bool {
	return s == RunWaitingDelay || s == RunWaitingTx || s == RunWaitingEvent || s == RunWaitingApproval
}

// Run is one workflow run: the claimed trigger occurrence and where its
// execution stands.
type Run struct {
	ID       uuid.UUID
	Workflow string
	// Project is the run's project, set by listings of every project
	// (RunFilter.AllProjects); Workflow is then its local name.
	Project     string
	Generation  int64
	Attempt     int
	TriggerKey  string
	TriggerKind trigger.Kind
	Trigger     json.RawMessage
	Status      RunStatus
	Position    *string
	Epoch       int
	Error       *string
	FailedStep  *string
	ChainID     *int64
	BlockNumber *int64
	OrphanedAt  *time.Time
	WakeAt      *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  *time.Time
	// CancelReason is what the operator said when cancelling the run
	// (rflow runs cancel --reason); nil when nothing was said.
	CancelReason *string

	// Journal is where the row and its steps live: a run (the zero value)
	// or an on_reorg response, whose Workflow, Generation and Trigger are
	// its orphaned run's.
	Journal Journal
}

const runColumns = `id, workflow_name, generation, attempt, trigger_key, trigger_kind, trigger, status, position,
	epoch, error, failed_step, chain_id, block_number, orphaned_at, wake_at, created_at, updated_at, finished_at, cancel_reason`

func scanRun(row pgx.Row) (*Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.Workflow, &r.Generation, &r.Attempt, &r.TriggerKey, &r.TriggerKind, &r.Trigger,
		&r.Status, &r.Position, &r.Epoch, &r.Error, &r.FailedStep, &r.ChainID, &r.BlockNumber, &r.OrphanedAt,
		&r.WakeAt, &r.CreatedAt, &r.UpdatedAt, &r.FinishedAt, &r.CancelReason)
	r.Error = scrub(r.Error)
	return &r, err
}

// scrub masks URL credentials in a journaled error on its way out. The
// engine already writes them masked; this keeps rows written by older
// versions out of API replies and `runs show` too.
func scrub(msg *string) *string {
	if msg == nil {
		return nil
	}
	clean := redact.Text(*msg)
	return &clean
}

// GetRun loads one run. With forUpdate it locks the row for the rest of tx.
func GetRun(ctx context.Context, db DBTX, id uuid.UUID, forUpdate bool) (*Run, error) {
	q := `SELECT ` + runColumns + ` FROM rflow.workflow_runs WHERE id = $1`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	r, err := scanRun(db.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	return r, nil
}

// RunFilter selects runs for ListRuns.
type RunFilter struct {
	Workflow string
	Status   RunStatus // empty: any
	// Limit caps the page (0: 50). ListRuns sets no upper bound; callers
	// that serve untrusted requests do.
	Limit int
	// Before pages backwards: runs listed after this run, newest first.
	Before *uuid.UUID
	// Rehearsals includes the runs of replays and tests, which are hidden
	// unless asked for here or named by Workflow.
	Rehearsals bool
	// Compensated keeps runs whose orphaning started an on_reorg response
	// (pending decisions and re-included logs do not count).
	Compensated bool
	// Namespace is the project whose runs are listed (Workflow is one of
	// its local names), under their local names; AllProjects lists every
	// project's instead, each run with its Project.
	Namespace   Namespace
	AllProjects bool
}

// ListRuns returns a page of runs, newest first: by created_at, then id
// (runs claimed in one transaction share created_at), a keyset the
// workflow_runs_paging index serves (workflow_runs_workflow_paging,
// _status_paging or _workflow_status under filters), so deep pages cost
// what the first one does. A Before run that does not exist (pruned meanwhile) is ErrNotFound.
//
// A filter on workflow or status is passed so that the planner cannot
// treat it as an equality (the workflow as a one-element array, the status
// as a range) and the query orders by the filtered columns first. With an
// equality Postgres drops those columns from the ORDER BY, and then
// workflow_runs_paging, walked newest first through the rows the filter
// rejects, serves the order too: chosen when the filtered runs are common
// overall but not among the newest (--workflow W while another workflow
// ran the last 30,000 runs read all of them, 155–444 ms at 1,000,000
// runs). Ordered by (workflow_name, status, created_at), one index alone
// serves the order and the filter bounds its scan, under custom and
// generic plans alike. The order is the same: the filtered columns are
// constant within the result. The status is a range, not an array, because
// an array on an index's second column loses the index's order (Postgres
// 15), and a range on its first column would not stop the scan where the
// status ends.
func ListRuns(ctx context.Context, db DBTX, f RunFilter) ([]*Run, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	// Only the conditions in use are in the query: under a generic plan an
	// ($n IS NULL OR …) condition cannot bound the index scan, and deep
	// pages would read every run before them.
	where := []string{"true"}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var order []string
	names := []string{f.Workflow}
	switch {
	case f.Workflow == "" || IsRehearsal(f.Workflow):
	case f.AllProjects:
		// The workflow of that name in every project: its order is then
		// created_at's alone.
		var err error
		if names, err = qualifiedEverywhere(ctx, db, f.Workflow); err != nil {
			return nil, err
		}
	default:
		names = []string{f.Namespace.Qualify(f.Workflow)}
	}
	switch {
	case f.Workflow != "":
		where = append(where, "workflow_name = ANY("+arg(names)+")")
		if len(names) == 1 {
			order = append(order, "workflow_name")
		}
		if f.Status != "" {
			where = append(where, fmt.Sprintf("status BETWEEN %s AND %[1]s", arg(f.Status)))
			order = append(order, "status")
		}
	case f.Status != "":
		where = append(where, "status = ANY("+arg([]string{string(f.Status)})+")")
		order = append(order, "status")
	}
	switch {
	case f.Workflow == "" && !f.Rehearsals && f.AllProjects:
		where = append(where, notRehearsal("workflow_name"))
	case f.Workflow == "" && !f.Rehearsals:
		where = append(where, f.Namespace.filter("workflow_name"))
	case f.Workflow == "" && !f.AllProjects:
		where = append(where, f.Namespace.filterWithRehearsals("workflow_name"))
	}
	if f.Compensated {
		where = append(where, `EXISTS (SELECT 1 FROM rflow.reorg_runs rr WHERE rr.run_id = workflow_runs.id
			AND rr.status NOT IN ('pending', 'reincluded'))`)
	}
	if f.Before != nil {
		var at time.Time
		err := db.QueryRow(ctx, `SELECT created_at FROM rflow.workflow_runs WHERE id = $1`, *f.Before).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("list runs after run %s: %w", *f.Before, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		where = append(where, fmt.Sprintf("(created_at, id) < (%s, %s)", arg(at), arg(*f.Before)))
	}
	rows, err := db.Query(ctx, `SELECT `+runColumns+` FROM rflow.workflow_runs WHERE `+strings.Join(where, " AND ")+`
		ORDER BY `+strings.Join(append(order, "created_at DESC", "id DESC"), ", ")+` LIMIT `+arg(f.Limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Run, error) { return scanRun(r) })
	if err != nil {
		return nil, err
	}
	if !f.AllProjects {
		for _, r := range runs {
			r.Workflow, _ = f.Namespace.Local(r.Workflow)
		}
		return runs, nil
	}
	projects, err := LoadProjectNames(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		r.Project, r.Workflow = projects.Split(r.Workflow)
	}
	return runs, nil
}

// ShortIDLen is the length of a short run id: the last hex digits of the
// id, its random part (a UUIDv7 starts with a timestamp that runs claimed
// together share).
const ShortIDLen = 8

// ShortID is the short form of a run id, as the live view prints it.
func ShortID(id uuid.UUID) string {
	s := id.String()
	return s[len(s)-ShortIDLen:]
}

// RunsByShortID returns the runs (at most limit, newest first) whose id
// ends in short, a ShortIDLen-digit short id.
func RunsByShortID(ctx context.Context, db DBTX, short string, limit int) ([]*Run, error) {
	rows, err := db.Query(ctx, `
		SELECT `+runColumns+` FROM rflow.workflow_runs
		WHERE right(id::text, 8) = lower($1)
		ORDER BY created_at DESC, id DESC
		LIMIT $2`, short, limit)
	if err != nil {
		return nil, fmt.Errorf("find run %s: %w", short, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Run, error) { return scanRun(r) })
}

// RunUpdate is the new state of a run, written by the engine together with
// the step outcome that caused it.
type RunUpdate struct {
	Status     RunStatus
	Position   string
	Epoch      int
	Error      *string
	FailedStep *string
	WakeAt     *time.Time
}

// CancelRun marks a run cancelled unless it already finished. Jobs still
// queued for it become no-ops when they see the status. Cancelling a
// cancelled run changes nothing and returns it as it is: a repeated cancel
// is the same command, not an error.
func CancelRun(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*Run, error) {
	r, err := GetRun(ctx, tx, id, true)
	if err != nil {
		return nil, err
	}
	if r.Status == RunCancelled {
		return r, nil
	}
	if r.Status.Terminal() {
		return r, fmt.Errorf("run %s is already %s", id, r.Status)
	}
	_, err = tx.Exec(ctx, `
		UPDATE rflow.workflow_runs SET status = 'cancelled', updated_at = now(), finished_at = now(), wake_at = NULL
		WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	_, err = tx.Exec(ctx, `
		UPDATE rflow.step_runs SET status = 'cancelled', finished_at = now()
		WHERE run_id = $1 AND status IN ('queued', 'running', 'retrying', 'waiting')`, id)
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	return GetRun(ctx, tx, id, false)
}

// NoteCancelReason records why an operator cancelled run id (the first
// reason said stays: cancelling again changes nothing) and returns the run.
func NoteCancelReason(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) (*Run, error) {
	if _, err := tx.Exec(ctx, `UPDATE rflow.workflow_runs SET cancel_reason = $2
		WHERE id = $1 AND status = 'cancelled' AND cancel_reason IS NULL`, id, reason); err != nil {
		return nil, fmt.Errorf("note why run %s was cancelled: %w", id, err)
	}
	return GetRun(ctx, tx, id, false)
}

// ReopenJournal prepares a failed run-like row of journal j (a run, or a
// failed on_reorg response whose id is then id) for an operator's retry: it
// bumps the row's attempt (so jobs of the previous attempt become stale
// no-ops), clears the error, and makes the failed step, plus any step the
// failure abandoned, runnable again at a new attempt. Completed steps are
// untouched, so they never re-run. It returns the row and the steps to
// resume, failed step first.
func ReopenJournal(ctx context.Context, tx pgx.Tx, j Journal, id uuid.UUID) (*Run, []*StepRun, error) {
	noun := "run"
	if j == ReorgJournal {
		noun = "reorg response"
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+j.runs()+` WHERE id = $1 FOR UPDATE`, id); err != nil {
		return nil, nil, fmt.Errorf("lock %s %s: %w", noun, id, err)
	}
	r, err := scanRun(tx.QueryRow(ctx, j.runSQL(), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("%s %s: %w", noun, id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load %s %s: %w", noun, id, err)
	}
	r.Journal = j
	if r.Status != RunFailed {
		return nil, nil, fmt.Errorf("%s %s is %s: only failed runs can be retried", noun, id, r.Status)
	}
	if r.FailedStep == nil {
		return nil, nil, fmt.Errorf("%s %s has no failed step to resume from", noun, id)
	}
	rows, err := tx.Query(ctx, `
		UPDATE `+j.steps()+` SET attempt = attempt + 1, status = 'queued', error = NULL,
			started_at = NULL, finished_at = NULL
		WHERE run_id = $1 AND (step_key = $2 OR status = 'cancelled')
		RETURNING `+stepColumns, id, *r.FailedStep)
	if err != nil {
		return nil, nil, fmt.Errorf("reopen steps of %s %s: %w", noun, id, err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StepRun, error) { return scanStep(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("reopen steps of %s %s: %w", noun, id, err)
	}
	for i, s := range steps {
		if s.Key == *r.FailedStep {
			steps[0], steps[i] = steps[i], steps[0]
		}
	}
	if len(steps) == 0 || steps[0].Key != *r.FailedStep {
		return nil, nil, fmt.Errorf("%s %s: failed step %s is missing from the journal", noun, id, *r.FailedStep)
	}
	_, err = tx.Exec(ctx, `
		UPDATE `+j.runs()+` SET attempt = attempt + 1, status = 'running', error = NULL, failed_step = NULL,
			finished_at = NULL, updated_at = now()
		WHERE id = $1`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("reopen %s %s: %w", noun, id, err)
	}
	r.Attempt++
	r.Status, r.Error, r.FailedStep = RunRunning, nil, nil
	return r, steps, nil
}

// DeleteStep removes a journal row. Retrying a run re-evaluates a failed
// pure step (a condition, a fail, a foreach's items) from scratch.
func DeleteStep(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string) error {
	_, err := tx.Exec(ctx, `DELETE FROM rflow.step_runs WHERE run_id = $1 AND step_key = $2`, runID, key)
	if err != nil {
		return fmt.Errorf("delete step %s of run %s: %w", key, runID, err)
	}
	return nil
}

// RunByKey returns the id of the run that holds a trigger key, and whether
// that run's trigger payload equals trigger as a JSON value (key order and
// spacing aside; empty means {}), so a caller can tell a replay of an
// occurrence from another occurrence reusing its key.
func RunByKey(ctx context.Context, db DBTX, workflow, key string, trigger []byte) (uuid.UUID, bool, error) {
	if len(trigger) == 0 {
		trigger = []byte("{}")
	}
	var id uuid.UUID
	var same bool
	err := db.QueryRow(ctx, `
		SELECT id, trigger = $3::jsonb FROM rflow.workflow_runs WHERE workflow_name = $1 AND trigger_key = $2`,
		workflow, key, string(trigger)).Scan(&id, &same)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, false, fmt.Errorf("run of %s with key %s: %w", workflow, key, ErrNotFound)
	}
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("run of %s with key %s: %w", workflow, key, err)
	}
	return id, same, nil
}

// PausedRuns returns (and locks, skipping any a concurrent resume holds)
// the runs of workflow claimed while it was paused, which have not started.
func PausedRuns(ctx context.Context, db DBTX, workflow string) ([]*Run, error) {
	rows, err := db.Query(ctx, `
		SELECT `+runColumns+` FROM rflow.workflow_runs r
		WHERE workflow_name = $1 AND status = 'queued' AND position IS NULL
		  AND NOT EXISTS (SELECT 1 FROM rflow.step_runs s WHERE s.run_id = r.id)
		ORDER BY id
		FOR UPDATE SKIP LOCKED`, workflow)
	if err != nil {
		return nil, fmt.Errorf("paused runs of %s: %w", workflow, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Run, error) { return scanRun(r) })
}

// LastCronTick returns the newest tick claimed for a cron workflow, or the
// zero time. Keys are RFC 3339 UTC, so they sort as text.
func LastCronTick(ctx context.Context, db DBTX, workflow string) (time.Time, error) {
	var key *string
	err := db.QueryRow(ctx, `
		SELECT max(trigger_key) FROM rflow.workflow_runs WHERE workflow_name = $1 AND trigger_kind = 'cron'`,
		workflow).Scan(&key)
	if err != nil || key == nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, *key)
}
