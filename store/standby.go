package store

import (
	"context"
	"fmt"
)

// liveNodesSQL counts the registered processes whose liveness lock is held,
// read from pg_locks without taking any lock, among the rows filter keeps.
func liveNodesSQL(filter string) string {
	return `SELECT count(*) FROM rflow.nodes n WHERE ` + filter + ` AND ` + nodeLockHeld
}

// nodeLockHeld is true for a row n of rflow.nodes whose process holds its
// liveness lock ($1 is nodeLockClass).
const nodeLockHeld = `EXISTS (
	SELECT 1 FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.granted
	  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND l.classid::bigint = $1 AND l.objid::bigint = n.id AND l.objsubid = 2)`

// LiveNodes counts the registered rflow processes whose liveness lock is
// held, of every project and role.
func LiveNodes(ctx context.Context, db DBTX) (int, error) {
	var n int
	if err := db.QueryRow(ctx, liveNodesSQL("true"), nodeLockClass).Scan(&n); err != nil {
		return 0, fmt.Errorf("count live nodes: %w", err)
	}
	return n, nil
}

// LiveTriggerNodes counts the live processes of project that run triggers
// (not --workers-only), and those of versions that record no project: what
// a standby of project waits on. Processes of other projects and
// workers-only ones do not hold the project's trigger role.
func LiveTriggerNodes(ctx context.Context, db DBTX, project string) (int, error) {
	var n int
	err := db.QueryRow(ctx, liveNodesSQL(`n.triggers AND (n.project = $2 OR n.project = '')`), nodeLockClass, project).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live trigger processes of %s: %w", project, err)
	}
	return n, nil
}
