package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Batches count as one statement of stmtTimes, named by their first one,
// and their time is the round trip's.
func (s *stmtTimes) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	sql := "batch"
	if d.Batch != nil && len(d.Batch.QueuedQueries) > 0 {
		sql = fmt.Sprintf("batch(%d) %s", len(d.Batch.QueuedQueries), d.Batch.QueuedQueries[0].SQL)
	}
	return context.WithValue(ctx, stmtKey{}, startStmt(c, sql))
}

func (s *stmtTimes) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *stmtTimes) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	if st, ok := ctx.Value(stmtKey{}).(stmtStart); ok {
		s.add(st)
	}
}
