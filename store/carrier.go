package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// carriedSQL is the condition under which a step row s is carried by the
// River job s.carrier_job rather than by a job of its own: the carrier
// journaled it at its first attempt and it has not been settled since (a
// settle moves it on; a later attempt has a job of its own).
const carriedSQL = `s.carrier_job IS NOT NULL AND s.attempt = 1 AND s.status = 'queued'`

// Carried reports whether step s is pending on its carrier job (see
// carriedSQL): the condition a rescued carrier uses to find the step it
// was carrying when its process died.
func (s *StepRun) Carried(job int64) bool {
	return s.CarrierJob != nil && *s.CarrierJob == job && s.Attempt == 1 && s.Status == StepQueued
}

// HandOverStep ends the carrying of step key of run runID by job, in tx:
// the caller enqueues the step's own job in the same transaction. It
// reports false when the step is no longer carried by job (settled,
// cancelled, or handed over already): then the caller enqueues nothing.
func HandOverStep(ctx context.Context, tx pgx.Tx, runID uuid.UUID, key string, job int64) (bool, error) {
	tag, err := tx.Exec(ctx, `UPDATE rflow.step_runs s SET carrier_job = NULL
		WHERE s.run_id = $1 AND s.step_key = $2 AND s.carrier_job = $3 AND `+carriedSQL, [16]byte(runID), key, job)
	if err != nil {
		return false, fmt.Errorf("hand step %s of run %s over from job %d: %w", key, runID, job, err)
	}
	return tag.RowsAffected() == 1, nil
}

// NodesKnowCarriers reports whether every process registered in
// rflow.nodes knows carriers (knows_carriers, migration 046). A process of
// an older version registers without it, and its repair scan would enqueue
// a step while another process carries it: no step may be carried while
// one is registered.
func NodesKnowCarriers(ctx context.Context, db DBTX) (bool, error) {
	var all bool
	if err := db.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM rflow.nodes WHERE NOT knows_carriers)`).Scan(&all); err != nil {
		return false, fmt.Errorf("check that every process knows carriers: %w", err)
	}
	return all, nil
}
