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
}

// InFlightJobs lists the jobs River client clientID is running (its last
// attempt), oldest first, at most limit, and how many there are in all.
func InFlightJobs(ctx context.Context, db DBTX, clientID string, limit int) ([]InFlightJob, int, error) {
	rows, err := db.Query(ctx, `
		SELECT kind, args, count(*) OVER () FROM river.river_job
		WHERE state = 'running' AND attempted_by[array_upper(attempted_by, 1)] = $1
		ORDER BY attempted_at, id LIMIT $2`, clientID, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("jobs in flight in %s: %w", clientID, err)
	}
	total := 0
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InFlightJob, error) {
		var j InFlightJob
		err := r.Scan(&j.Kind, &j.Args, &total)
		return j, err
	})
	return jobs, total, err
}
