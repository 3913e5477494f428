package store

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// nodeLockClass is the first key of the two-key advisory locks that mark a
// live rflow process ("RFLN").
const nodeLockClass = 0x52464c4e

// Node is a live rflow process. It holds a session advisory lock on its id
// over a dedicated connection for as long as it lives; when the process
// dies, Postgres drops the connection and the lock with it, which is how
// other processes learn, within moments, that its jobs need rescuing.
type Node struct {
	ID       int64
	ClientID string
	conn     *pgx.Conn
}

// RegisterNode records this process under clientID (its River client id)
// and takes its liveness lock on a dedicated connection to url.
func RegisterNode(ctx context.Context, url, clientID string) (*Node, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("register node: %w", err)
	}
	host, _ := os.Hostname()
	n := &Node{ClientID: clientID, conn: conn}
	// The lock is taken before the row commits: another process must never
	// see the row without its lock held, or it would take this live node
	// for a dead one. (A session lock outlives the transaction.)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT nextval('rflow.nodes_id_seq')`).Scan(&n.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_lock($1, $2::int)`, nodeLockClass, n.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO rflow.nodes (id, client_id, hostname, pid) VALUES ($1, $2, $3, $4)`,
			n.ID, clientID, host, os.Getpid())
		return err
	})
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("register node: %w", err)
	}
	return n, nil
}

// Close releases the liveness lock and forgets the node: a clean shutdown.
func (n *Node) Close(ctx context.Context) error {
	_, err := n.conn.Exec(ctx, `DELETE FROM rflow.nodes WHERE id = $1`, n.ID)
	n.conn.Close(ctx)
	return err
}

// Ping checks the liveness connection (and refreshes seen_at for operators).
func (n *Node) Ping(ctx context.Context) error {
	_, err := n.conn.Exec(ctx, `UPDATE rflow.nodes SET seen_at = now() WHERE id = $1`, n.ID)
	return err
}

// RescueDeadNodes finds nodes whose liveness lock is free (their process
// died), makes the River jobs they were running available again at once —
// keeping their place in the queue (scheduled_at is untouched), so they run
// before work queued after them — and forgets them. It returns how many jobs it rescued. River's own
// rescuer would do the same only after RescueStuckJobsAfter.
func RescueDeadNodes(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	rows, err := pool.Query(ctx, `SELECT id, client_id FROM rflow.nodes`)
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	type node struct {
		id       int64
		clientID string
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
		var n node
		return n, r.Scan(&n.id, &n.clientID)
	})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	rescued := 0
	for _, n := range nodes {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var dead bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2::int)`, nodeLockClass, n.id).Scan(&dead); err != nil {
				return err
			}
			if !dead {
				return nil
			}
			tag, err := tx.Exec(ctx, `
				UPDATE river.river_job SET state = 'available'
				WHERE state = 'running' AND attempted_by[array_upper(attempted_by, 1)] = $1`, n.clientID)
			if err != nil {
				return err
			}
			rescued += int(tag.RowsAffected())
			_, err = tx.Exec(ctx, `DELETE FROM rflow.nodes WHERE id = $1`, n.id)
			return err
		})
		if err != nil {
			return rescued, fmt.Errorf("rescue node %s: %w", n.clientID, err)
		}
	}
	return rescued, nil
}
