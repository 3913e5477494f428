package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Journal names one of the step journals the engine drives: a table of
// run-like rows and a table of their steps, with the same columns. A run's
// steps are one; an on_reorg response's compensation steps are the other,
// so one engine (one advance, one step worker, one fence) serves both.
type Journal uint8

const (
	// RunJournal is rflow.workflow_runs and rflow.step_runs.
	RunJournal Journal = iota
	// ReorgJournal is rflow.reorg_runs and rflow.reorg_step_runs: the
	// on_reorg responses, one per (run, fork).
	ReorgJournal
)

// String names the journal in logs.
func (j Journal) String() string {
	if j == ReorgJournal {
		return "reorg"
	}
	return "run"
}

func (j Journal) runs() string {
	if j == ReorgJournal {
		return "rflow.reorg_runs"
	}
	return "rflow.workflow_runs"
}

func (j Journal) steps() string {
	if j == ReorgJournal {
		return "rflow.reorg_step_runs"
	}
	return "rflow.step_runs"
}

// responseRunSQL selects a response as a Run: the run-state columns are the
// response's own, the workflow, generation and trigger the orphaned run's,
// so the engine evaluates on_reorg: steps against the run's definition.
const responseRunSQL = `SELECT rr.id, r.workflow_name, r.generation, rr.attempt, r.trigger_key, r.trigger_kind, r.trigger,
	rr.status, rr.position, rr.epoch, rr.error, rr.failed_step, r.chain_id, r.block_number, r.orphaned_at, rr.wake_at,
	rr.created_at, rr.updated_at, rr.finished_at, NULL::text
	FROM rflow.reorg_runs rr JOIN rflow.workflow_runs r ON r.id = rr.run_id WHERE rr.id = $1`

func (j Journal) runSQL() string {
	if j == ReorgJournal {
		return responseRunSQL
	}
	return `SELECT ` + runColumns + ` FROM rflow.workflow_runs WHERE id = $1`
}

// LoadJournal loads a run-like row of journal j and its whole step journal
// in one round trip: what a step job reads before its effect.
func LoadJournal(ctx context.Context, db Batcher, j Journal, id uuid.UUID) (*Run, []*StepRun, error) {
	b := &pgx.Batch{}
	// Ids go in as bytes: pgx would encode a uuid.UUID through its
	// driver.Valuer (a string, parsed back) after a failed plan.
	b.Queue(j.runSQL(), [16]byte(id))
	b.Queue(`SELECT `+stepColumns+` FROM `+j.steps()+` WHERE run_id = $1 ORDER BY created_at, step_key`, [16]byte(id))
	br := db.SendBatch(ctx, b)
	defer br.Close()
	run, err := scanRun(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("%s %s: %w", j, id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load %s %s: %w", j, id, err)
	}
	run.Journal = j
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("journal of %s %s: %w", j, id, err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StepRun, error) { return scanStep(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("journal of %s %s: %w", j, id, err)
	}
	return run, steps, nil
}

// JournalSteps returns the step journal of a run-like row of j, in the
// order steps were created.
func JournalSteps(ctx context.Context, db DBTX, j Journal, id uuid.UUID) ([]*StepRun, error) {
	rows, err := db.Query(ctx, `SELECT `+stepColumns+` FROM `+j.steps()+` WHERE run_id = $1 ORDER BY created_at, step_key`, id)
	if err != nil {
		return nil, fmt.Errorf("journal of %s %s: %w", j, id, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StepRun, error) { return scanStep(r) })
}

// LockJournalStep locks a journal row of j for the rest of tx.
func LockJournalStep(ctx context.Context, tx pgx.Tx, j Journal, runID uuid.UUID, key string) (*StepRun, error) {
	s, err := scanStep(tx.QueryRow(ctx, `SELECT `+stepColumns+` FROM `+j.steps()+` WHERE run_id = $1 AND step_key = $2 FOR UPDATE`,
		runID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("step %s of %s %s: %w", key, j, runID, ErrNotFound)
	}
	return s, err
}
