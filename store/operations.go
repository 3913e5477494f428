package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The queries of this file are what an operator's scrape (/metrics) and a
// readiness probe (/readyz) read. Each one is bounded by what is in flight
// rather than by history, and reads through an index, so a scrape costs
// the same on a database with a billion completed runs as on an empty one.

// Gauges is one snapshot of the aggregate state the metrics report.
type Gauges struct {
	// Runs counts unfinished runs by workflow and status (queued, running,
	// waiting_delay, waiting_tx); partial index workflow_runs_incomplete.
	Runs []LabeledCount
	// Failed counts dead-lettered (failed) runs per workflow: one probe of
	// workflow_runs_workflow_status per deployed workflow.
	Failed []LabeledCount
	// Jobs counts River jobs not yet finished, by queue and state
	// (River's river_job_prioritized_fetching_index).
	Jobs []LabeledCount
	// Transactions counts relayer transactions in flight by wallet, chain
	// and status (partial index transactions_inflight).
	Transactions []LabeledCount
	// NonceGaps lists, per wallet address and chain, how many nonces below
	// the highest one in flight no live or confirmed transaction holds:
	// holes that stall every send above them until they are filled.
	NonceGaps []NonceGap
	// Cursors is every trigger cursor with its network's head.
	Cursors []CursorLag
}

// LabeledCount is a count under its labels, in the order the query names.
type LabeledCount struct {
	Labels []string
	Count  int64
}

// NonceGap is the number of holes in one wallet's nonces on one chain.
type NonceGap struct {
	Address string
	ChainID int64
	Gaps    int64
}

// CursorLag is how far one trigger cursor (task, phase) is behind the head
// of its network's block window.
type CursorLag struct {
	Task    string // "event/<workflow>", "block/<workflow>", "read/<workflow>"
	Phase   string // head, confirmed, safe, finalized, block
	ChainID int64
	Block   int64 // the last block fully claimed
	// Head is the newest block of the window (Block when it is empty), or
	// for a phase that follows a finality tag (safe, finalized) the tag's
	// block when lower.
	Head int64
	// Behind is how long the oldest unclaimed block has been seen: zero
	// when the cursor is at the head. A cursor so far behind that its next
	// block left the window counts from its own last move.
	Behind time.Duration
	// Updated is when the cursor last moved; HeadSeen when the head block
	// was seen.
	Updated, HeadSeen time.Time
}

// ReadGauges runs the metrics queries in one read-only transaction, so
// the numbers of one scrape agree with each other.
func ReadGauges(ctx context.Context, pool interface {
	BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
}) (*Gauges, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, fmt.Errorf("metrics: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	g := &Gauges{}
	queries := []struct {
		what string
		sql  string
		into *[]LabeledCount
	}{
		{"runs", `
			SELECT workflow_name, status, count(*) FROM rflow.workflow_runs
			WHERE status NOT IN ('completed', 'failed', 'cancelled') AND ` + notRehearsal("workflow_name") + `
			GROUP BY 1, 2 ORDER BY 1, 2`, &g.Runs},
		{"dead letter queue", `
			SELECT w.name, (SELECT count(*) FROM rflow.workflow_runs r
			                WHERE r.workflow_name = w.name AND r.status = 'failed')
			FROM rflow.workflows w WHERE ` + notRehearsal("w.name") + ` ORDER BY 1`, &g.Failed},
		{"river jobs", `
			SELECT queue, state::text, count(*) FROM ` + RiverSchema + `.river_job
			WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending')
			GROUP BY 1, 2 ORDER BY 1, 2`, &g.Jobs},
		{"relayer transactions", `
			SELECT wallet, chain_id::text, status, count(*) FROM relayer.transactions
			WHERE status IN ('pending', 'in_mempool', 'mined')
			GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, &g.Transactions},
	}
	for _, q := range queries {
		rows, err := tx.Query(ctx, q.sql)
		if err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", q.what, err)
		}
		*q.into, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (LabeledCount, error) {
			vals, err := row.Values()
			if err != nil {
				return LabeledCount{}, err
			}
			c := LabeledCount{Labels: make([]string, len(vals)-1)}
			for i, v := range vals[:len(vals)-1] {
				c.Labels[i], _ = v.(string)
			}
			c.Count, _ = vals[len(vals)-1].(int64)
			return c, nil
		})
		if err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", q.what, err)
		}
	}
	if g.NonceGaps, err = nonceGaps(ctx, tx); err != nil {
		return nil, err
	}
	if g.Cursors, err = CursorLags(ctx, tx); err != nil {
		return nil, err
	}
	return g, nil
}

// nonceGaps counts, per wallet and chain with a send in flight, the nonces
// between the one after the highest confirmed and the highest in flight
// that no live or confirmed transaction holds (index
// transactions_wallet_nonce; the range is what is in flight).
func nonceGaps(ctx context.Context, tx pgx.Tx) ([]NonceGap, error) {
	rows, err := tx.Query(ctx, `
		WITH w AS (
			SELECT n.address, n.chain_id,
			       (SELECT max(t.nonce) FROM relayer.transactions t
			        WHERE t.from_address = n.address AND t.chain_id = n.chain_id
			          AND t.status IN ('pending', 'in_mempool', 'mined')) AS top,
			       (SELECT coalesce(max(t.nonce) + 1, 0) FROM relayer.transactions t
			        WHERE t.from_address = n.address AND t.chain_id = n.chain_id
			          AND t.status = 'confirmed') AS floor
			FROM relayer.nonces n)
		SELECT w.address, w.chain_id,
		       CASE WHEN w.top IS NULL OR w.top < w.floor THEN 0
		            ELSE (w.top - w.floor + 1) - (
		                SELECT count(DISTINCT t.nonce) FROM relayer.transactions t
		                WHERE t.from_address = w.address AND t.chain_id = w.chain_id
		                  AND t.nonce BETWEEN w.floor AND w.top
		                  AND t.status IN ('pending', 'in_mempool', 'mined', 'confirmed'))
		       END
		FROM w ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("metrics: nonce gaps: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NonceGap, error) {
		var g NonceGap
		return g, row.Scan(&g.Address, &g.ChainID, &g.Gaps)
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: nonce gaps: %w", err)
	}
	return out, nil
}

// CursorLags returns every trigger cursor with its network's head: one
// primary-key probe of indexer.blocks per cursor for the head and one for
// the block after the cursor.
func CursorLags(ctx context.Context, db DBTX) ([]CursorLag, error) {
	rows, err := db.Query(ctx, `
		SELECT c.task, c.phase, c.chain_id, c.block, c.updated_at,
		       coalesce(h.number, c.block), coalesce(h.seen_at, c.updated_at),
		       CASE WHEN h.number IS NULL OR h.number <= c.block THEN 0
		            ELSE extract(epoch FROM now() - coalesce(greatest(nb.seen_at, h.tag_seen), c.updated_at))::float8
		       END
		FROM indexer.cursors c
		LEFT JOIN LATERAL (SELECT b.number, b.seen_at, NULL::timestamptz AS tag_seen FROM indexer.blocks b
		                   WHERE b.chain_id = c.chain_id ORDER BY b.number DESC LIMIT 1) w ON true
		-- A phase that follows a finality tag is measured against the
		-- tag's block (it cannot be further), and counts from when the tag
		-- last moved.
		LEFT JOIN indexer.finality f ON f.chain_id = c.chain_id AND f.tag = c.phase
		LEFT JOIN LATERAL (SELECT CASE WHEN c.phase IN ('safe', 'finalized') THEN least(w.number, coalesce(f.number, c.block))
		                               ELSE w.number END AS number,
		                          CASE WHEN c.phase IN ('safe', 'finalized') THEN coalesce(f.seen_at, w.seen_at)
		                               ELSE w.seen_at END AS seen_at,
		                          CASE WHEN c.phase IN ('safe', 'finalized') THEN f.seen_at END AS tag_seen) h ON w.number IS NOT NULL
		LEFT JOIN indexer.blocks nb ON nb.chain_id = c.chain_id AND nb.number = c.block + 1
		ORDER BY c.task, c.phase`)
	if err != nil {
		return nil, fmt.Errorf("cursor lags: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (CursorLag, error) {
		var c CursorLag
		var behind float64
		err := row.Scan(&c.Task, &c.Phase, &c.ChainID, &c.Block, &c.Updated, &c.Head, &c.HeadSeen, &behind)
		c.Behind = time.Duration(behind * float64(time.Second))
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("cursor lags: %w", err)
	}
	return out, nil
}

// Stalled reports whether the cursor has not moved for longer than stall
// while its network's head moved on past it: the trigger is stuck.
func (c CursorLag) Stalled(stall time.Duration) bool {
	return c.Head > c.Block && c.HeadSeen.Sub(c.Updated) > stall
}
