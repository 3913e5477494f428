package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// WorkflowRow is a deployed workflow.
type WorkflowRow struct {
	Name       string    `json:"name"`
	Generation int64     `json:"generation"`
	SpecHash   string    `json:"spec_hash"`
	Paused     bool      `json:"paused"`
	UpdatedAt  time.Time `json:"updated_at"`
	Spec       []byte    `json:"-"`
}

// Deployed is the outcome of a deploy.
type Deployed struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	Changed    bool   `json:"changed"`
}

// DeployWorkflow stores spec as the current definition of name. The
// generation increases only when the spec hash changes, and every generation
// stays loadable so runs in flight keep executing the spec they were claimed
// under. It reports the resulting generation and whether it changed.
func DeployWorkflow(ctx context.Context, tx pgx.Tx, name, hash string, spec []byte) (Deployed, error) {
	var gen int64
	err := tx.QueryRow(ctx, `
		INSERT INTO rflow.workflows AS w (name, generation, spec_hash, spec)
		VALUES ($1, 1, $2, $3)
		ON CONFLICT (name) DO UPDATE
			SET generation = w.generation + 1, spec_hash = EXCLUDED.spec_hash, spec = EXCLUDED.spec, updated_at = now()
			WHERE w.spec_hash <> EXCLUDED.spec_hash
		RETURNING generation`, name, hash, spec).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		// Same hash: nothing changed.
		err = tx.QueryRow(ctx, `SELECT generation FROM rflow.workflows WHERE name = $1`, name).Scan(&gen)
		if err != nil {
			return Deployed{}, fmt.Errorf("deploy %s: %w", name, err)
		}
		return Deployed{Name: name, Generation: gen}, nil
	}
	if err != nil {
		return Deployed{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO rflow.workflow_generations (workflow_name, generation, spec_hash, spec)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, name, gen, hash, spec)
	if err != nil {
		return Deployed{}, fmt.Errorf("deploy %s: record generation: %w", name, err)
	}
	return Deployed{Name: name, Generation: gen, Changed: true}, nil
}

// WorkflowSpec loads the spec of one generation of a workflow.
func WorkflowSpec(ctx context.Context, db DBTX, name string, generation int64) ([]byte, error) {
	var spec []byte
	err := db.QueryRow(ctx, `
		SELECT spec FROM rflow.workflow_generations WHERE workflow_name = $1 AND generation = $2`,
		name, generation).Scan(&spec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("workflow %s generation %d: %w", name, generation, ErrNotFound)
	}
	return spec, err
}

// GetWorkflow returns one deployed workflow.
func GetWorkflow(ctx context.Context, db DBTX, name string) (*WorkflowRow, error) {
	var w WorkflowRow
	err := db.QueryRow(ctx, `
		SELECT name, generation, spec_hash, paused, updated_at, spec FROM rflow.workflows WHERE name = $1`,
		name).Scan(&w.Name, &w.Generation, &w.SpecHash, &w.Paused, &w.UpdatedAt, &w.Spec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("workflow %s: %w", name, ErrNotFound)
	}
	return &w, err
}

// ListWorkflows returns every deployed workflow, by name.
func ListWorkflows(ctx context.Context, db DBTX) ([]WorkflowRow, error) {
	rows, err := db.Query(ctx, `
		SELECT name, generation, spec_hash, paused, updated_at, spec FROM rflow.workflows ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkflowRow, error) {
		var w WorkflowRow
		err := r.Scan(&w.Name, &w.Generation, &w.SpecHash, &w.Paused, &w.UpdatedAt, &w.Spec)
		return w, err
	})
}

// SetWorkflowPaused pauses or resumes a workflow. A paused workflow's
// triggers claim nothing; runs already claimed continue.
func SetWorkflowPaused(ctx context.Context, db DBTX, name string, paused bool) error {
	tag, err := db.Exec(ctx, `UPDATE rflow.workflows SET paused = $2, updated_at = now() WHERE name = $1`, name, paused)
	if err != nil {
		return fmt.Errorf("pause %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("workflow %s: %w", name, ErrNotFound)
	}
	return nil
}
