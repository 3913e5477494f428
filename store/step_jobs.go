package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The SQL of River job j as a step job: whether it is one, and its run id
// and step key whichever its args' shape (jobs.StepArgs' object, or
// jobs.FirstStepArgs' [run id, "step/generation"]).
const (
	isStepJob   = `j.kind IN ('rflow.step', 'rflow.step.first')`
	stepJobRun  = `CASE WHEN jsonb_typeof(j.args) = 'array' THEN j.args->>0 ELSE j.args->>'run_id' END`
	stepJobStep = `CASE WHEN jsonb_typeof(j.args) = 'array' THEN regexp_replace(j.args->>1, '/[^/]*$', '')
		ELSE j.args->>'step_key' END`
)

// StepJobs maps each step key of journal id (a run, or an on_reorg
// response) to the newest River job that ran or will run it, for the
// console's links into River UI. Jobs River has already cleaned away are
// absent. Either args shape counts (jobs.StepArgs' run_id, or
// jobs.FirstStepArgs' [run id, "step/generation"]); both are lookups in
// River's GIN index on args, as in jobOfRun. A step carried inline by the
// job of the step before it links that job (its carrier_job).
func StepJobs(ctx context.Context, db DBTX, id uuid.UUID) (map[string]int64, error) {
	rows, err := db.Query(ctx, `
		SELECT `+stepJobStep+`, max(j.id)
		FROM `+RiverSchema+`.river_job j
		WHERE `+isStepJob+`
		  AND (j.args @> jsonb_build_object('run_id', $1::text) OR j.args ? $1::text)
		GROUP BY 1
		UNION ALL
		SELECT s.step_key, s.carrier_job FROM rflow.step_runs s
		WHERE s.run_id = $1::text::uuid AND s.carrier_job IS NOT NULL
		UNION ALL
		SELECT s.step_key, s.carrier_job FROM rflow.reorg_step_runs s
		WHERE s.run_id = $1::text::uuid AND s.carrier_job IS NOT NULL`, id.String())
	if err != nil {
		return nil, fmt.Errorf("step jobs of %s: %w", id, err)
	}
	out := map[string]int64{}
	var key string
	var job int64
	_, err = pgx.ForEachRow(rows, []any{&key, &job}, func() error {
		out[key] = max(out[key], job) // a carried step retried has a job of its own, newer
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("step jobs of %s: %w", id, err)
	}
	return out, nil
}
