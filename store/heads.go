package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NodeHead is what a network's node answered to one head poll.
type NodeHead struct {
	ChainID int64
	Network string
	Number  int64
	// Time is the block's timestamp (the chain's clock).
	Time time.Time
}

// RecordNodeHead writes what the node answered to the head tracker's poll
// (indexer.heads), fenced by the head lease in the same statement: a holder
// that lost the lease writes nothing and gets ErrLeaseLost. When the head
// advanced it folds the blocks' timestamps into the observed block time.
func RecordNodeHead(ctx context.Context, db DBTX, lease Lease, h NodeHead) error {
	tag, err := db.Exec(ctx, `
		INSERT INTO indexer.heads AS o (chain_id, network, lease, lease_token, node_head, node_head_time, polled_at)
		SELECT $1, $2, $3, $4, $5, $6, now()
		WHERE EXISTS (SELECT 1 FROM rflow.leases WHERE name = $3 AND token = $4 AND expires_at > now())
		ON CONFLICT (chain_id) DO UPDATE SET
			network = excluded.network, lease = excluded.lease, lease_token = excluded.lease_token,
			node_head = excluded.node_head, node_head_time = excluded.node_head_time, polled_at = now(),
			block_time = CASE
				WHEN excluded.node_head <= o.node_head OR excluded.node_head_time < o.node_head_time THEN o.block_time
				ELSE coalesce(0.8 * o.block_time, 0) + CASE WHEN o.block_time IS NULL THEN 1 ELSE 0.2 END *
				     extract(epoch FROM excluded.node_head_time - o.node_head_time)::float8 / (excluded.node_head - o.node_head)
			END`,
		h.ChainID, h.Network, lease.Name, lease.Token, h.Number, h.Time)
	if err != nil {
		return fmt.Errorf("record node head of chain %d: %w", h.ChainID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record node head of chain %d: %w", h.ChainID, ErrLeaseLost)
	}
	return nil
}

// HeadProgress is how one network's head is doing, as the database knows
// it: the window's newest block, the node's last answer and the head
// lease. Durations are measured by the database's clock.
type HeadProgress struct {
	ChainID int64
	Network string // "" when the head tracker never wrote indexer.heads
	// Window is the window's newest block (-1: empty window); WindowAge how
	// long ago it was seen, that is since rflow's view of the chain last
	// advanced.
	Window    int64
	WindowAge time.Duration
	// Polled is false when the node never answered a poll recorded here;
	// else NodeHead is the block it last reported, PollAge how long ago it
	// answered and NodeHeadAge how old that block's timestamp is.
	Polled      bool
	NodeHead    int64
	PollAge     time.Duration
	NodeHeadAge time.Duration
	// BlockTime is the observed time per block (0: not known yet).
	BlockTime time.Duration
	// Holder is the owner of the head lease and LeaseLive whether it is
	// live (a process renews it while its tracker runs, stuck or not).
	Holder    string
	LeaseLive bool
}

// Head is the newest block known to exist: the window's head, or the
// node's last reported head when the window trails it.
func (h HeadProgress) Head() int64 { return max(h.Window, h.NodeHead) }

// HeadProgresses returns the head progress of every chain with a window or
// a recorded poll: one primary-key probe of indexer.blocks per chain.
func HeadProgresses(ctx context.Context, db DBTX) ([]HeadProgress, error) {
	rows, err := db.Query(ctx, `
		WITH chains AS (
			SELECT chain_id FROM indexer.heads
			UNION SELECT DISTINCT chain_id FROM indexer.cursors)
		SELECT c.chain_id, coalesce(h.network, ''), coalesce(w.number, -1),
		       coalesce(extract(epoch FROM now() - w.seen_at)::float8, 0),
		       h.chain_id IS NOT NULL, coalesce(h.node_head, -1),
		       coalesce(extract(epoch FROM now() - h.polled_at)::float8, 0),
		       coalesce(extract(epoch FROM now() - h.node_head_time)::float8, 0),
		       coalesce(h.block_time, 0), coalesce(l.owner, ''), coalesce(l.expires_at > now(), false)
		FROM chains c
		LEFT JOIN indexer.heads h ON h.chain_id = c.chain_id
		LEFT JOIN LATERAL (SELECT b.number, b.seen_at FROM indexer.blocks b
		                   WHERE b.chain_id = c.chain_id ORDER BY b.number DESC LIMIT 1) w ON true
		LEFT JOIN rflow.leases l ON l.name = h.lease
		WHERE w.number IS NOT NULL OR h.chain_id IS NOT NULL
		ORDER BY c.chain_id`)
	if err != nil {
		return nil, fmt.Errorf("head progress: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (HeadProgress, error) {
		var h HeadProgress
		var windowAge, pollAge, nodeAge, blockTime float64
		err := row.Scan(&h.ChainID, &h.Network, &h.Window, &windowAge, &h.Polled, &h.NodeHead, &pollAge, &nodeAge,
			&blockTime, &h.Holder, &h.LeaseLive)
		h.WindowAge, h.PollAge, h.NodeHeadAge, h.BlockTime = seconds(windowAge), seconds(pollAge), seconds(nodeAge), seconds(blockTime)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("head progress: %w", err)
	}
	return out, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
