package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// InFlightJob is a River job a process is working, for its shutdown to say
// what it waits for.
type InFlightJob struct {
	Kind string
	// Args are the job's raw args: a step job's name its run and step.
	Args []byte
	// Carried is the step a step job is working inline (see carriedSQL):
	// the newest of its run's steps that names the job its carrier; ""
	// when it works the step its args name.
	Carried string
}

// InFlightJobs lists the jobs River client clientID is running (its last
// attempt), oldest first, at most limit, and how many there are in all.
func InFlightJobs(ctx context.Context, db DBTX, clientID string, limit int) ([]InFlightJob, int, error) {
	rows, err := db.Query(ctx, `
		SELECT j.kind, j.args, coalesce(c.step_key, ''), count(*) OVER () FROM river.river_job j
		LEFT JOIN LATERAL (
			SELECT s.step_key FROM rflow.step_runs s
			WHERE `+isStepJob+` AND s.run_id = (`+stepJobRun+`)::uuid
			  AND s.carrier_job = j.id
			ORDER BY s.created_at DESC LIMIT 1) c ON true
		WHERE j.state = 'running' AND j.attempted_by[array_upper(j.attempted_by, 1)] = $1
		ORDER BY j.attempted_at, j.id LIMIT $2`, clientID, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("jobs in flight in %s: %w", clientID, err)
	}
	total := 0
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InFlightJob, error) {
		var j InFlightJob
		err := r.Scan(&j.Kind, &j.Args, &j.Carried, &total)
		return j, err
	})
	return jobs, total, err
}
