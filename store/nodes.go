package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// nodeLockClass is the first key of the two-key advisory locks that mark a
// live rflow process ("RFLN").
const nodeLockClass = 0x52464c4e

// Node is a live rflow process. It holds a session advisory lock on its id
// over a dedicated connection for as long as it lives; when the process
// dies, Postgres drops the connection and the lock with it, which is how
// other processes learn, within moments, that its jobs need rescuing.
//
// A Postgres restart (or a dropped connection) frees the lock of a process
// that is still alive. Ping notices, reconnects and takes the same lock
// again; RescueDeadNodes gives every node a grace period after the server
// starts to do so before it judges any of them dead.
type Node struct {
	ID       int64
	ClientID string
	url      string
	host     string

	role NodeRole

	mu     sync.Mutex
	conn   *pgx.Conn // nil while disconnected
	closed bool
}

// NodeRole is what a registered process does, for the standbys that wait
// on it.
type NodeRole struct {
	// Project is the project (rflow.yaml's name) the process runs.
	Project string
	// WorkersOnly: the process works steps and runs no triggers.
	WorkersOnly bool
	// Console is the console URL the process serves ("" for none), for
	// rflow status.
	Console string
}

// RegisterNode records this process under clientID (its River client id)
// and takes its liveness lock on a dedicated connection to url.
func RegisterNode(ctx context.Context, url, clientID string) (*Node, error) {
	return RegisterNodeAs(ctx, url, clientID, NodeRole{})
}

// RegisterNodeAs is RegisterNode for a process of role's project and role.
func RegisterNodeAs(ctx context.Context, url, clientID string, role NodeRole) (*Node, error) {
	host, _ := os.Hostname()
	n := &Node{ClientID: clientID, url: url, host: host, role: role}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("register node: %w", err)
	}
	// The lock is taken before the row commits: another process must never
	// see the row without its lock held, or it would take this live node
	// for a dead one. (A session lock outlives the transaction.)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT nextval('rflow.nodes_id_seq')`).Scan(&n.ID); err != nil {
			return err
		}
		_, err := n.lockAndUpsert(ctx, tx)
		return err
	})
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("register node: %w", err)
	}
	n.conn = conn
	return n, nil
}

// lockAndUpsert takes the node's liveness lock in tx's session and writes
// its row. It reports whether the row was missing, i.e. whether another
// process judged this one dead while it could not hold its lock.
func (n *Node) lockAndUpsert(ctx context.Context, tx pgx.Tx) (bool, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_lock($1, $2::int)`, nodeLockClass, n.ID); err != nil {
		return false, err
	}
	var inserted bool
	err := tx.QueryRow(ctx, `
		INSERT INTO rflow.nodes (id, client_id, hostname, pid, host_identity, project, triggers, console_url, knows_carriers)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true)
		ON CONFLICT (id) DO UPDATE SET seen_at = now(), suspect_since = NULL
		RETURNING xmax = 0`, n.ID, n.ClientID, n.host, os.Getpid(), hostIdentity(), n.role.Project, !n.role.WorkersOnly,
		n.role.Console).Scan(&inserted)
	return inserted, err
}

// Close releases the liveness lock and forgets the node: a clean shutdown.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.conn == nil {
		return nil
	}
	_, err := n.conn.Exec(ctx, `DELETE FROM rflow.nodes WHERE id = $1`, n.ID)
	n.conn.Close(ctx)
	n.conn = nil
	return err
}

// Reregistered is what Ping reports after it had to reconnect.
type Reregistered struct {
	// TakenForDead is true when the node's row was gone: another process
	// found its lock free past the grace period and rescued its jobs.
	TakenForDead bool
}

// Ping checks the liveness connection and refreshes seen_at (for
// operators). When the connection is gone — after a Postgres restart every
// session and its locks are — it reconnects, takes the same lock again and
// restores the row, and returns a non-nil *Reregistered. An error means the
// node is not registered right now; the caller must not judge other nodes
// until a Ping succeeds.
func (n *Node) Ping(ctx context.Context) (*Reregistered, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrNodeClosed
	}
	if n.conn != nil {
		_, err := n.conn.Exec(ctx, `UPDATE rflow.nodes SET seen_at = now() WHERE id = $1`, n.ID)
		if err == nil {
			return nil, nil
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !n.conn.IsClosed() {
			// The server answered: the session, and its lock, live on.
			// Reconnecting would free the lock for a moment.
			return nil, fmt.Errorf("ping node %d: %w", n.ID, err)
		}
		if ctx.Err() != nil && !n.conn.IsClosed() {
			return nil, fmt.Errorf("ping node %d: %w", n.ID, err)
		}
		// The connection is gone, and the lock with it: a fresh
		// session is the only way to hold it again.
		n.conn.Close(context.Background())
		n.conn = nil
	}
	conn, err := pgx.Connect(ctx, n.url)
	if err != nil {
		return nil, fmt.Errorf("reconnect node %d: %w", n.ID, err)
	}
	var lost bool
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		lost, err = n.lockAndUpsert(ctx, tx)
		return err
	})
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("re-register node %d: %w", n.ID, err)
	}
	n.conn = conn
	return &Reregistered{TakenForDead: lost}, nil
}

// RescueDeadNodes finds nodes that died, makes the River jobs they were
// running available again at once — keeping their place in the queue
// (scheduled_at is untouched), so they run before work queued after them —
// and forgets them. It returns how many jobs it rescued. River's own
// rescuer would do the same only after RescueStuckJobsAfter.
//
// A node whose liveness lock is free may only have lost its connection: a
// Postgres restart frees every lock at once, and a cut connection
// (pg_terminate_backend, a proxy's reset) frees one, while the process and
// its steps in flight live on and it takes its lock again within a second
// (Ping). Rescuing its jobs then would run them a second time, at the same
// time. So a free lock makes the node suspect (suspect_since), and it is
// judged dead only once its lock has stayed free for grace, or at once
// when its process is provably gone: same host identity as self's process
// (host, boot, pid namespace) and no process with its pid. A node not seen
// since the server started is judged only once the server has been up for
// grace as well.
//
// self is the caller's client id: its own jobs are never rescued, since it
// is still running them.
func RescueDeadNodes(ctx context.Context, pool *pgxpool.Pool, self string, grace time.Duration) (int, error) {
	rows, err := pool.Query(ctx, `
		SELECT id, client_id, pid, host_identity, suspect_since IS NOT NULL AND suspect_since < now() - make_interval(secs => $2)
		FROM rflow.nodes
		WHERE client_id <> $1
		  AND (seen_at > pg_postmaster_start_time() OR pg_postmaster_start_time() < now() - make_interval(secs => $2))`,
		self, grace.Seconds())
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	type node struct {
		id           int64
		clientID     string
		pid          int
		host         string
		graceExpired bool
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
		var n node
		return n, r.Scan(&n.id, &n.clientID, &n.pid, &n.host, &n.graceExpired)
	})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	me := hostIdentity()
	rescued := 0
	for _, n := range nodes {
		gone := n.graceExpired || (me != "" && n.host == me && processGone(n.pid))
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var free bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2::int)`, nodeLockClass, n.id).Scan(&free); err != nil {
				return err
			}
			if !free {
				return nil
			}
			if !gone {
				// Suspect: dead only if the lock stays free past the grace.
				_, err := tx.Exec(ctx, `UPDATE rflow.nodes SET suspect_since = coalesce(suspect_since, now()) WHERE id = $1`, n.id)
				return err
			}
			tag, err := tx.Exec(ctx, `
				UPDATE river.river_job SET state = 'available'
				WHERE state = 'running' AND attempted_by[array_upper(attempted_by, 1)] = $1`, n.clientID)
			if err != nil {
				return err
			}
			rescued += int(tag.RowsAffected())
			if err := releaseLeadership(ctx, tx, n.clientID); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM rflow.nodes WHERE id = $1`, n.id)
			return err
		})
		if err != nil {
			return rescued, fmt.Errorf("rescue node %s: %w", n.clientID, err)
		}
	}
	return rescued, nil
}

// releaseLeadership resigns a dead node's River leadership for it, as
// River's own elector does when it stops: the leader row goes and the
// "resigned" notice on River's leadership channel wakes every other
// elector, which bids at once. Without it the dead leader's term runs to
// its TTL (about 15 s), and everything only the leader does waits that
// long: scheduling the jobs of delays and retries that came due, River's
// periodic jobs, its rescuer. River v0.51 names the channel
// "<schema>.river_leadership" and the notice {"action":"resigned",
// "leader_id":…}.
func releaseLeadership(ctx context.Context, tx pgx.Tx, clientID string) error {
	_, err := tx.Exec(ctx, `
		WITH gone AS (DELETE FROM `+RiverSchema+`.river_leader WHERE leader_id = $1 RETURNING leader_id)
		SELECT pg_notify($2, json_build_object('action', 'resigned', 'leader_id', leader_id)::text) FROM gone`,
		clientID, RiverSchema+".river_leadership")
	if err != nil {
		return fmt.Errorf("release leadership of %s: %w", clientID, err)
	}
	return nil
}

// ErrNodeClosed is returned by Ping after Close.
var ErrNodeClosed = errors.New("node closed")
