package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RepinRun pins run id to generation and replaces its trigger payload. A
// retry of a run whose trigger failed evaluates the trigger under the
// workflow's current generation, and the run then runs that generation
// (with the log decoded now, when it could not be before).
func RepinRun(ctx context.Context, tx pgx.Tx, id uuid.UUID, generation int64, trigger []byte) error {
	if _, err := tx.Exec(ctx, `UPDATE rflow.workflow_runs SET generation = $2, trigger = $3::jsonb, updated_at = now()
		WHERE id = $1`, id, generation, string(trigger)); err != nil {
		return fmt.Errorf("repin run %s to generation %d: %w", id, generation, err)
	}
	return nil
}
