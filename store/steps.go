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

// Step statuses.
const (
	StepQueued    = "queued"
	StepRetrying  = "retrying"
	StepWaiting   = "waiting"
	StepCompleted = "completed"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
	StepCancelled = "cancelled"
)

// StepRun is one row of the step journal.
type StepRun struct {
	RunID      uuid.UUID       `json:"run_id"`
	Key        string          `json:"step_key"`
	StepID     string          `json:"step_id"`
	Kind       string          `json:"kind"`
	Attempt    int             `json:"attempt"`
	Status     string          `json:"status"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *string         `json:"error,omitempty"`
	WakeAt     *time.Time      `json:"wake_at,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

const stepColumns = `run_id, step_key, step_id, kind, attempt, status, input, output, error, wake_at,
	created_at, started_at, finished_at`

func scanStep(row pgx.Row) (*StepRun, error) {
	var s StepRun
	err := row.Scan(&s.RunID, &s.Key, &s.StepID, &s.Kind, &s.Attempt, &s.Status, &s.Input, &s.Output,
		&s.Error, &s.WakeAt, &s.CreatedAt, &s.StartedAt, &s.FinishedAt)
	return &s, err
}

// GetStep loads one journal row.
func GetStep(ctx context.Context, db DBTX, runID uuid.UUID, key string) (*StepRun, error) {
	s, err := scanStep(db.QueryRow(ctx, `SELECT `+stepColumns+` FROM rflow.step_runs WHERE run_id = $1 AND step_key = $2`,
		runID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("step %s of run %s: %w", key, runID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load step %s of run %s: %w", key, runID, err)
	}
	return s, nil
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
	Status string
	Input  []byte
	Output []byte
	Error  *string
	WakeAt *time.Time
}

// StepRef names one journal row.
type StepRef struct {
	RunID uuid.UUID
	Key   string
}

// InsertSteps creates journal rows (of one run or many) in one statement.
// Rows that already exist are left alone (ON CONFLICT DO NOTHING); it
// returns the rows it created, so a replayed advance enqueues nothing twice.
func InsertSteps(ctx context.Context, tx pgx.Tx, steps []NewStep) (map[StepRef]bool, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	n := len(steps)
	runIDs := make([]uuid.UUID, n)
	keys, ids, kinds, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	inputs, outputs, errs := make([]*string, n), make([]*string, n), make([]*string, n)
	wakes := make([]*time.Time, n)
	for i, s := range steps {
		runIDs[i], keys[i], ids[i], kinds[i], statuses[i] = s.RunID, s.Key, s.StepID, s.Kind, s.Status
		if s.Input != nil {
			v := string(s.Input)
			inputs[i] = &v
		}
		if s.Output != nil {
			v := string(s.Output)
			outputs[i] = &v
		}
		errs[i], wakes[i] = s.Error, s.WakeAt
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO rflow.step_runs (run_id, step_key, step_id, kind, status, input, output, error, wake_at, finished_at)
		SELECT s.run_id, s.key, s.id, s.kind, s.status, s.input::jsonb, s.output::jsonb, s.error, s.wake,
			CASE WHEN s.status IN ('completed', 'skipped', 'failed') THEN now() END
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::timestamptz[]) AS s(run_id, key, id, kind, status, input, output, error, wake)
		ON CONFLICT (run_id, step_key) DO NOTHING
		RETURNING run_id, step_key`, runIDs, keys, ids, kinds, statuses, inputs, outputs, errs, wakes)
	if err != nil {
		return nil, fmt.Errorf("journal %d step(s): %w", n, err)
	}
	created := make(map[StepRef]bool, n)
	var ref StepRef
	_, err = pgx.ForEachRow(rows, []any{&ref.RunID, &ref.Key}, func() error { created[ref] = true; return nil })
	if err != nil {
		return nil, fmt.Errorf("journal %d step(s): %w", n, err)
	}
	return created, nil
}

// StepOutcome is how a step attempt ended.
type StepOutcome struct {
	Status    string // completed, failed, retrying, waiting
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
	var output *string
	if o.Output != nil {
		v := string(o.Output)
		output = &v
	}
	bump := 0
	if o.NextAttempt {
		bump = 1
	}
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.step_runs
		SET status = $4, output = COALESCE($5::jsonb, output), error = $6, attempt = attempt + $7,
			started_at = COALESCE($8, started_at), wake_at = COALESCE($9, wake_at),
			finished_at = CASE WHEN $4 IN ('completed', 'failed') THEN now() END
		WHERE run_id = $1 AND step_key = $2 AND attempt = $3 AND status IN ('queued', 'retrying', 'waiting', 'running')`,
		runID, key, attempt, o.Status, output, o.Error, bump, o.StartedAt, o.WakeAt)
	if err != nil {
		return false, fmt.Errorf("settle step %s of run %s: %w", key, runID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// LockStep locks a journal row for the rest of tx (foreach bookkeeping
// serialises concurrent item completions on the foreach row).
func LockStep(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string) (*StepRun, error) {
	s, err := scanStep(tx.QueryRow(ctx, `SELECT `+stepColumns+` FROM rflow.step_runs WHERE run_id = $1 AND step_key = $2 FOR UPDATE`,
		runID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("step %s of run %s: %w", key, runID, ErrNotFound)
	}
	return s, err
}

// SetStepOutput overwrites a step's status and output (foreach progress).
func SetStepOutput(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key, status string, output []byte) error {
	_, err := tx.Exec(ctx, `
		UPDATE rflow.step_runs SET status = $3, output = $4::jsonb,
			finished_at = CASE WHEN $3 IN ('completed', 'failed') THEN now() END
		WHERE run_id = $1 AND step_key = $2`, runID, key, status, string(output))
	if err != nil {
		return fmt.Errorf("update step %s of run %s: %w", key, runID, err)
	}
	return nil
}

// Batcher is a pool, connection or transaction that can send a batch.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// RunWithSteps loads a run and its whole journal in one round trip: what a
// step job reads before its effect.
func RunWithSteps(ctx context.Context, db Batcher, id uuid.UUID) (*Run, []*StepRun, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+runColumns+` FROM rflow.workflow_runs WHERE id = $1`, id)
	b.Queue(`SELECT `+stepColumns+` FROM rflow.step_runs WHERE run_id = $1 ORDER BY created_at, step_key`, id)
	br := db.SendBatch(ctx, b)
	defer br.Close()
	run, err := scanRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load run %s: %w", id, err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("journal of run %s: %w", id, err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StepRun, error) { return scanStep(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("journal of run %s: %w", id, err)
	}
	return run, steps, nil
}
