package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RunCounts counts one workflow's runs by status.
func RunCounts(ctx context.Context, db DBTX, workflow string) (map[RunStatus]int64, error) {
	rows, err := db.Query(ctx, `SELECT status, count(*) FROM rflow.workflow_runs WHERE workflow_name = $1 GROUP BY status`, workflow)
	if err != nil {
		return nil, fmt.Errorf("count runs of %s: %w", workflow, err)
	}
	out := map[RunStatus]int64{}
	var s RunStatus
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { out[s] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count runs of %s: %w", workflow, err)
	}
	return out, nil
}
