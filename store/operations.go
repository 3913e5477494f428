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
	// Cursors is every cursor (triggers and wait feeds) with its
	// network's head.
	Cursors []CursorLag
	// Heads is every network's head progress.
	Heads []HeadProgress
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

// CursorLag is how far one cursor (task, phase) is behind the head of its
// network: a trigger's or a wait feed's.
type CursorLag struct {
	Task    string // "event/<workflow>", "block/…", "read/…", "wait/<chain id>/<address|any>/<topic>"
	Phase   string // head, confirmed, safe, finalized, block, tick
	ChainID int64
	Block   int64 // the last block fully claimed
	// Head is the newest block known: the window's head, or the node's last
	// reported head when the window trails it (a head tracker behind its
	// node); Block when neither is known. For a phase that follows a
	// finality tag (safe, finalized) it is the tag's recorded block when
	// lower than the window's head.
	Head int64
	// Behind is how long the oldest unclaimed block has been seen: zero
	// when the cursor is at the head. A cursor so far behind that its next
	// block left the window counts from its own last move.
	Behind time.Duration
	// Updated is when the cursor last moved.
	Updated time.Time
	// Waiting is how long ago the first block that arrived after the
	// cursor last moved was seen (zero when none has): a healthy cursor
	// moves soon after every new block, whatever its depth.
	Waiting time.Duration
	// Holder owns the task's lease and LeaseLive says whether it is live.
	Holder    string
	LeaseLive bool
}

// ReadGauges runs the metrics queries in one read-only transaction, so
// the numbers of one scrape agree with each other. Runs and the dead letter
// queue are ns's, under its local workflow names.
func ReadGauges(ctx context.Context, pool interface {
	BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
}, ns Namespace) (*Gauges, error) {
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
			WHERE status NOT IN ('completed', 'failed', 'cancelled') AND ` + ns.filter("workflow_name") + `
			GROUP BY 1, 2 ORDER BY 1, 2`, &g.Runs},
		{"dead letter queue", `
			SELECT w.name, (SELECT count(*) FROM rflow.workflow_runs r
			                WHERE r.workflow_name = w.name AND r.status = 'failed')
			FROM rflow.workflows w WHERE ` + ns.filter("w.name") + ` ORDER BY 1`, &g.Failed},
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
	for _, l := range [][]LabeledCount{g.Runs, g.Failed} {
		for i := range l {
			l[i].Labels[0], _ = ns.Local(l[i].Labels[0])
		}
	}
	if g.NonceGaps, err = nonceGaps(ctx, tx); err != nil {
		return nil, err
	}
	if g.Cursors, err = CursorLags(ctx, tx); err != nil {
		return nil, err
	}
	if g.Heads, err = HeadProgresses(ctx, tx); err != nil {
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

// CursorLags returns every cursor with its network's head: primary-key
// probes of indexer.blocks per cursor (the head, the block after the
// cursor, the window blocks above it) and of rflow.leases for its holder.
// Lease names carry the project's prefix (<project>/<task>); a cursor's
// lease is the one whose name ends in /<task> (or is <task>) under the
// token that last moved it.
func CursorLags(ctx context.Context, db DBTX) ([]CursorLag, error) {
	rows, err := db.Query(ctx, `
		SELECT c.task, c.phase, c.chain_id, c.block, c.updated_at,
		       CASE WHEN NOT tagged.is THEN greatest(coalesce(h.number, c.block), coalesce(nh.node_head, c.block))
		            ELSE least(coalesce(h.number, c.block), coalesce(f.number, c.block)) END,
		       CASE WHEN h.number IS NULL OR h.number <= c.block THEN 0
		            WHEN NOT tagged.is THEN extract(epoch FROM now() - coalesce(nb.seen_at, c.updated_at))::float8
		            WHEN coalesce(f.number, c.block) <= c.block THEN 0
		            ELSE extract(epoch FROM now() - greatest(nb.seen_at, f.seen_at))::float8
		       END,
		       CASE WHEN NOT tagged.is THEN coalesce(extract(epoch FROM now() - (
		                SELECT min(b.seen_at) FROM indexer.blocks b
		                WHERE b.chain_id = c.chain_id AND b.number > c.block AND b.seen_at > c.updated_at))::float8, 0)
		            WHEN coalesce(f.number, c.block) <= c.block THEN 0
		            ELSE extract(epoch FROM now() - greatest(f.seen_at, c.updated_at))::float8
		       END,
		       coalesce(l.owner, ''), coalesce(l.expires_at > now(), false)
		FROM indexer.cursors c
		LEFT JOIN LATERAL (SELECT b.number, b.seen_at FROM indexer.blocks b
		                   WHERE b.chain_id = c.chain_id ORDER BY b.number DESC LIMIT 1) h ON true
		LEFT JOIN indexer.blocks nb ON nb.chain_id = c.chain_id AND nb.number = c.block + 1
		LEFT JOIN indexer.heads nh ON nh.chain_id = c.chain_id
		-- A phase that follows a finality tag (safe, finalized) is measured
		-- against the tag's block, which it cannot pass, and waits from when
		-- the tag (or the cursor) last moved: a finalized cursor is not 64
		-- blocks behind, nor stalled between two epochs.
		CROSS JOIN LATERAL (SELECT c.phase IN ('safe', 'finalized') AS is) tagged
		LEFT JOIN indexer.finality f ON f.chain_id = c.chain_id AND f.tag = c.phase
		LEFT JOIN LATERAL (SELECT x.owner, x.expires_at FROM rflow.leases x
		                   WHERE (x.name = c.task OR right(x.name, length(c.task) + 1) = '/' || c.task)
		                   ORDER BY x.token = c.lease_token DESC, x.expires_at DESC LIMIT 1) l ON true
		ORDER BY c.task, c.phase`)
	if err != nil {
		return nil, fmt.Errorf("cursor lags: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (CursorLag, error) {
		var c CursorLag
		var behind, waiting float64
		err := row.Scan(&c.Task, &c.Phase, &c.ChainID, &c.Block, &c.Updated, &c.Head, &behind, &waiting,
			&c.Holder, &c.LeaseLive)
		c.Behind, c.Waiting = seconds(behind), seconds(waiting)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("cursor lags: %w", err)
	}
	return out, nil
}

// Stalled reports whether a block arrived after the cursor last moved and
// has waited longer than stall without the cursor moving: the task is
// stuck (failing, or not running). An idle chain, or a cursor waiting for
// its confirmations on one, is not: no block arrived since it moved.
func (c CursorLag) Stalled(stall time.Duration) bool {
	return c.Head > c.Block && c.Waiting > stall
}
