package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// NoteCancelledSend records what became of the transaction of a send step
// that a cancel caught waiting: note ("cancel: …") becomes the cancelled
// step's error and output is merged into its output, fenced on the step
// still being the cancelled attempt. The run's error is then rebuilt from
// the notes of all its cancelled sends, so `runs show` and the cancel's reply
// say whether value may still move. It reports whether the step matched.
func NoteCancelledSend(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string, attempt int, note string, output []byte) (bool, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.step_runs SET error = $4, output = COALESCE(output, '{}'::jsonb) || COALESCE($5::jsonb, '{}'::jsonb)
		WHERE run_id = $1 AND step_key = $2 AND attempt = $3 AND status = 'cancelled' AND kind = 'send'`,
		runID, key, attempt, note, jsonText(output))
	if err != nil {
		return false, fmt.Errorf("note cancelled send %s of run %s: %w", key, runID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	_, err = tx.Exec(ctx, `
		UPDATE rflow.workflow_runs r SET updated_at = now(), error = (
			SELECT string_agg(s.step_key || ': ' || s.error, '; ' ORDER BY s.step_key) FROM rflow.step_runs s
			WHERE s.run_id = r.id AND s.kind = 'send' AND s.status = 'cancelled' AND s.error LIKE 'cancel:%')
		WHERE r.id = $1 AND r.status = 'cancelled'`, runID)
	if err != nil {
		return false, fmt.Errorf("note cancelled send %s of run %s: %w", key, runID, err)
	}
	return true, nil
}
