package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// InFlightGeneration is a workflow generation that runs not yet finished
// were claimed under.
type InFlightGeneration struct {
	Workflow   string
	Generation int64
	Runs       int64
}

// InFlightGenerations lists the generations of live (not rehearsal)
// workflows that have runs in flight: what a new project must still
// compile, since those runs finish on their generation.
func InFlightGenerations(ctx context.Context, db DBTX) ([]InFlightGeneration, error) {
	rows, err := db.Query(ctx, `
		SELECT workflow_name, generation, count(*) FROM rflow.workflow_runs
		WHERE status NOT IN ('completed', 'failed', 'cancelled', 'reincluded') AND `+notRehearsal("workflow_name")+`
		GROUP BY workflow_name, generation ORDER BY workflow_name, generation`)
	if err != nil {
		return nil, fmt.Errorf("generations in flight: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InFlightGeneration, error) {
		var g InFlightGeneration
		return g, r.Scan(&g.Workflow, &g.Generation, &g.Runs)
	})
	if err != nil {
		return nil, fmt.Errorf("generations in flight: %w", err)
	}
	return out, nil
}
