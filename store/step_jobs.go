package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StepJobs maps each step key of journal id (a run, or an on_reorg
// response) to the newest River job that ran or will run it, for the
// console's links into River UI. Jobs River has already cleaned away are
// absent. Either args shape counts (jobs.StepArgs' run_id, or
// jobs.FirstStepArgs' [run id, "step/generation"]); both are lookups in
// River's GIN index on args, as in jobOfRun.
func StepJobs(ctx context.Context, db DBTX, id uuid.UUID) (map[string]int64, error) {
	rows, err := db.Query(ctx, `
		SELECT CASE WHEN jsonb_typeof(j.args) = 'array' THEN regexp_replace(j.args->>1, '/[^/]*$', '')
		            ELSE j.args->>'step_key' END, max(j.id)
		FROM `+RiverSchema+`.river_job j
		WHERE j.kind IN ('rflow.step', 'rflow.step.first')
		  AND (j.args @> jsonb_build_object('run_id', $1::text) OR j.args ? $1::text)
		GROUP BY 1`, id.String())
	if err != nil {
		return nil, fmt.Errorf("step jobs of %s: %w", id, err)
	}
	out := map[string]int64{}
	var key string
	var job int64
	_, err = pgx.ForEachRow(rows, []any{&key, &job}, func() error {
		out[key] = job
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("step jobs of %s: %w", id, err)
	}
	return out, nil
}
