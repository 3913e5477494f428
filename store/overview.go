package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TriggerCursor is how far one network's chain triggers have read: the
// slowest cursor of a live workflow's event, block or read trigger. A
// cursor far below the head is a backfill under way.
type TriggerCursor struct {
	ChainID int64
	// Block is the slowest trigger's last fully processed block.
	Block int64
	// Triggers counts the cursors of live workflows on the chain.
	Triggers int
}

// TriggerCursors returns the slowest trigger cursor of every chain among
// ns's workflows. Cursors of retired workflows (which stopped reading), of
// rehearsals and of other projects are left out, and so are wait feeds:
// they follow the head, not a start block.
func TriggerCursors(ctx context.Context, db DBTX, ns Namespace) ([]TriggerCursor, error) {
	rows, err := db.Query(ctx, `
		SELECT c.chain_id, min(c.block), count(*)::int FROM indexer.cursors c
		JOIN rflow.workflows w ON w.name = split_part(c.task, '/', 2)
		WHERE split_part(c.task, '/', 1) IN ('event', 'block', 'read') AND w.retired_at IS NULL AND `+ns.filter("w.name")+`
		GROUP BY c.chain_id ORDER BY c.chain_id`)
	if err != nil {
		return nil, fmt.Errorf("trigger cursors: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[TriggerCursor])
	if err != nil {
		return nil, fmt.Errorf("trigger cursors: %w", err)
	}
	return out, nil
}

// LiveRunCounts counts the runs of ns's live workflows (not rehearsals, not
// other projects') by status.
func LiveRunCounts(ctx context.Context, db DBTX, ns Namespace) (map[RunStatus]int64, error) {
	rows, err := db.Query(ctx, `SELECT status, count(*) FROM rflow.workflow_runs WHERE `+ns.filter("workflow_name")+` GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	out := map[RunStatus]int64{}
	var s RunStatus
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { out[s] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return out, nil
}

// ReorgEvent is one recorded reorg, for the live view.
type ReorgEvent struct {
	ID           int64
	ChainID      int64
	ForkBlock    int64
	Depth        int
	OrphanedRuns int
	DetectedAt   time.Time
}

// ReorgsAfter returns the reorgs recorded after id afterID, oldest first
// (at most 100). LatestReorgID is where a reader that starts now begins.
func ReorgsAfter(ctx context.Context, db DBTX, afterID int64) ([]ReorgEvent, error) {
	rows, err := db.Query(ctx, `
		SELECT id, chain_id, fork_block, depth, orphaned_runs, detected_at FROM indexer.reorgs
		WHERE id > $1 ORDER BY id LIMIT 100`, afterID)
	if err != nil {
		return nil, fmt.Errorf("reorgs after %d: %w", afterID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ReorgEvent])
	if err != nil {
		return nil, fmt.Errorf("reorgs after %d: %w", afterID, err)
	}
	return out, nil
}

// LatestReorgID is the id of the newest recorded reorg of any chain (0:
// none).
func LatestReorgID(ctx context.Context, db DBTX) (int64, error) {
	var id int64
	if err := db.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM indexer.reorgs`).Scan(&id); err != nil {
		return 0, fmt.Errorf("latest reorg: %w", err)
	}
	return id, nil
}

// LiveConsole is a live process's console address.
type LiveConsole struct {
	Host string
	Pid  int
	URL  string
}

// LiveConsoles lists the console URLs the live processes of ns's project
// serve (those holding their liveness lock), oldest process first. The
// home namespace of a command run without a project file has no name: its
// processes are the home project's (and older versions', which record
// none).
func LiveConsoles(ctx context.Context, db DBTX, ns Namespace) ([]LiveConsole, error) {
	rows, err := db.Query(ctx, `
		SELECT n.hostname, n.pid, n.console_url FROM rflow.nodes n
		WHERE n.console_url <> '' AND `+nodeLockHeld+`
		  AND (n.project = $2 OR ($3 AND (n.project = '' OR n.project IN (SELECT name FROM rflow.projects WHERE prefix = ''))))
		ORDER BY n.started_at`, nodeLockClass, ns.Project, ns.Home())
	if err != nil {
		return nil, fmt.Errorf("live consoles: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LiveConsole])
	if err != nil {
		return nil, fmt.Errorf("live consoles: %w", err)
	}
	return out, nil
}
