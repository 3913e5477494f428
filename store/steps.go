package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StepStatus is where one journaled step stands (the step_runs.status
// column).
type StepStatus string

// Step statuses.
const (
	StepQueued    StepStatus = "queued"
	StepRetrying  StepStatus = "retrying"
	StepWaiting   StepStatus = "waiting"
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
	StepCancelled StepStatus = "cancelled"
)

// StepStatuses lists every step status.
func StepStatuses() []StepStatus {
	return []StepStatus{StepQueued, StepRetrying, StepWaiting, StepCompleted, StepFailed, StepSkipped, StepCancelled}
}

// Valid reports whether s is one of StepStatuses.
func (s StepStatus) Valid() bool { return slices.Contains(StepStatuses(), s) }

// StepRun is one row of the step journal.
type StepRun struct {
	RunID      uuid.UUID
	Key        string
	StepID     string
	Kind       string
	Attempt    int
	Status     StepStatus
	Input      json.RawMessage
	Output     json.RawMessage
	Error      *string
	WakeAt     *time.Time
	HeldAt     *time.Time // held: an orphaned run's step waiting for its reorg's decision
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	// CarrierJob is the River job that carries the step inline (it ran the
	// step before it and went straight on to this one); nil when the step
	// has a job of its own.
	CarrierJob *int64
}

const stepColumns = `run_id, step_key, step_id, kind, attempt, status, input, output, error, wake_at,
	held_at, created_at, started_at, finished_at, carrier_job`

func scanStep(row pgx.Row) (*StepRun, error) {
	var s StepRun
	err := row.Scan(&s.RunID, &s.Key, &s.StepID, &s.Kind, &s.Attempt, &s.Status, &s.Input, &s.Output,
		&s.Error, &s.WakeAt, &s.HeldAt, &s.CreatedAt, &s.StartedAt, &s.FinishedAt, &s.CarrierJob)
	s.Error = scrub(s.Error)
	return &s, err
}

// RunSteps returns a run's whole journal, in the order steps were created.
func RunSteps(ctx context.Context, db DBTX, runID uuid.UUID) ([]*StepRun, error) {
	rows, err := db.Query(ctx, `SELECT `+stepColumns+` FROM rflow.step_runs WHERE run_id = $1 ORDER BY created_at, step_key`, runID)
	if err != nil {
		return nil, fmt.Errorf("journal of run %s: %w", runID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StepRun, error) { return scanStep(r) })
}

// NewStep is a journal row to create.
type NewStep struct {
	RunID  uuid.UUID
	Key    string
	StepID string
	Kind   string
	Status StepStatus
	Input  []byte
	Output []byte
	Error  *string
	WakeAt *time.Time
	// Carrier is the River job that carries the step inline instead of a
	// job of its own (StepRun.CarrierJob).
	Carrier *int64
}

// StepRef names one journal row.
type StepRef struct {
	RunID uuid.UUID
	Key   string
}

// StepOutcome is how a step attempt ended.
type StepOutcome struct {
	Status    StepStatus // completed, failed, retrying, waiting
	Output    []byte
	Error     *string
	StartedAt *time.Time
	WakeAt    *time.Time
	// NextAttempt bumps the attempt (a known failure that will be retried).
	NextAttempt bool
}

// SettleStep writes an attempt's outcome, fenced on the step still being
// incomplete at that attempt. False means another worker (or an operator)
// got there first: the caller must roll back and do nothing else.
func SettleStep(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string, attempt int, o StepOutcome) (bool, error) {
	return SettleJournalStep(ctx, tx, RunJournal, runID, key, attempt, o)
}

// SettleJournalStep is SettleStep in journal j.
func SettleJournalStep(ctx context.Context, tx pgx.Tx, j Journal, runID uuid.UUID, key string, attempt int, o StepOutcome) (bool, error) {
	w := Writes{Journal: j}
	w.SettleStep(runID, key, attempt, o)
	return w.Send(ctx, tx)
}

// Batcher is a pool, connection or transaction that can send a batch.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// RunWithSteps loads a run and its whole journal in one round trip: what a
// step job reads before its effect.
func RunWithSteps(ctx context.Context, db Batcher, id uuid.UUID) (*Run, []*StepRun, error) {
	return LoadJournal(ctx, db, RunJournal, id)
}
