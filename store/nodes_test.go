package store_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestNodeLiveness: a live node's jobs are never rescued; once its
// connection is gone, its running jobs become available and it is
// forgotten, all without touching other nodes.
func TestNodeLiveness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool2, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool2.Close()

	live, err := store.RegisterNode(ctx, url, "live-client")
	require.NoError(t, err)
	defer live.Close(ctx)
	dead, err := store.RegisterNode(ctx, url, "dead-client")
	require.NoError(t, err)
	for _, client := range []string{"live-client", "dead-client"} {
		_, err := pool2.Exec(ctx, `
			INSERT INTO river.river_job (kind, args, state, attempt, attempted_by, max_attempts, queue, priority, scheduled_at)
			VALUES ('x', '{}', 'running', 1, ARRAY[$1], 5, 'default', 1, now() - interval '1 minute')`, client)
		require.NoError(t, err)
	}

	n, err := store.RescueDeadNodes(ctx, pool2, "", 0)
	require.NoError(t, err)
	require.Zero(t, n, "both nodes hold their liveness locks")

	dead.Drop() // the process dies: its connection (and lock) go away
	require.Eventually(t, func() bool {
		n, err := store.RescueDeadNodes(ctx, pool2, "", 0)
		require.NoError(t, err)
		return n == 1
	}, 10e9, 50e6)
	var states []string
	rows, err := pool2.Query(ctx, `SELECT attempted_by[1] || ':' || state FROM river.river_job ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		states = append(states, s)
	}
	require.Equal(t, []string{"dead-client:available", "live-client:running"}, states)
	var nodes int
	require.NoError(t, pool2.QueryRow(ctx, `SELECT count(*) FROM rflow.nodes`).Scan(&nodes))
	require.Equal(t, 1, nodes)
}

func insertRunningJob(t *testing.T, pool *pgxpool.Pool, client string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO river.river_job (kind, args, state, attempt, attempted_by, max_attempts, queue, priority, scheduled_at)
		VALUES ('x', '{}', 'running', 1, ARRAY[$1], 5, 'default', 1, now() - interval '1 minute')`, client)
	require.NoError(t, err)
}

// rescue retries RescueDeadNodes while the pool's connections, broken by a
// restart, are replaced.
func rescue(t *testing.T, pool *pgxpool.Pool, self string, grace time.Duration) int {
	t.Helper()
	var n int
	require.Eventually(t, func() bool {
		var err error
		n, err = store.RescueDeadNodes(context.Background(), pool, self, grace)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	return n
}

func jobStates(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT attempted_by[1] || ':' || state FROM river.river_job ORDER BY 1`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestNodeLivenessAcrossRestart: a Postgres restart frees every node's
// lock at once. Within the grace period no node not seen since is judged
// dead, a node never rescues its own jobs, each node takes its lock back
// on its next Ping, and afterwards a node that really dies is rescued at
// once, grace or not.
func TestNodeLivenessAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []store.ShutdownMode{store.ShutdownFast, store.ShutdownImmediate} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := storetest.NewCluster(t)
			pool, err := pgxpool.New(ctx, c.URL())
			require.NoError(t, err)
			defer pool.Close()
			a, err := store.RegisterNode(ctx, c.URL(), "a")
			require.NoError(t, err)
			defer a.Close(ctx)
			b, err := store.RegisterNode(ctx, c.URL(), "b")
			require.NoError(t, err)
			defer b.Close(ctx)
			insertRunningJob(t, pool, "a")
			insertRunningJob(t, pool, "b")

			c.Restart(t, mode, 0)
			// Both locks are gone, but the server has just started: a
			// rescue pass leaves both nodes alone, and never touches
			// the caller's own jobs even with no grace at all.
			require.Zero(t, rescue(t, pool, "a", time.Minute))
			require.Zero(t, rescue(t, pool, "b", time.Minute))
			require.Equal(t, []string{"a:running", "b:running"}, jobStates(t, pool))

			for _, n := range []*store.Node{a, b} {
				re, err := n.Ping(ctx)
				require.NoError(t, err)
				require.NotNil(t, re, "node %s must notice it lost its lock", n.ClientID)
				require.False(t, re.TakenForDead)
				re, err = n.Ping(ctx)
				require.NoError(t, err)
				require.Nil(t, re, "registered again: the next ping is an ordinary one")
			}
			require.Zero(t, rescue(t, pool, "a", 0), "b holds its lock again")
			require.Zero(t, rescue(t, pool, "b", 0), "a holds its lock again")

			// b really dies after it re-registered: its connection goes,
			// and no process has its pid any more.
			gone := exec.Command("true")
			require.NoError(t, gone.Run())
			_, err = pool.Exec(ctx, `UPDATE rflow.nodes SET pid = $2 WHERE id = $1`, b.ID, gone.Process.Pid)
			require.NoError(t, err)
			b.Drop()
			require.Zero(t, rescue(t, pool, "b", 0), "b's own pass never rescues b")
			// Still within the grace, but b was seen since the restart
			// and its process is gone: it is rescued at once.
			require.Eventually(t, func() bool { return rescue(t, pool, "a", time.Minute) == 1 }, 10*time.Second, 50*time.Millisecond)
			require.Equal(t, []string{"a:running", "b:available"}, jobStates(t, pool))
			var nodes []string
			rows, err := pool.Query(ctx, `SELECT client_id FROM rflow.nodes ORDER BY 1`)
			require.NoError(t, err)
			for rows.Next() {
				var s string
				require.NoError(t, rows.Scan(&s))
				nodes = append(nodes, s)
			}
			require.Equal(t, []string{"a"}, nodes, fmt.Sprintf("a re-registered, b forgotten (%s)", mode))
		})
	}
}

// TestNodeTakenForDeadReregisters: a node rescued while it could not hold
// its lock learns it on its next Ping and is registered again, so a later
// death of it is still rescued fast.
func TestNodeTakenForDeadReregisters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	a, err := store.RegisterNode(ctx, url, "a")
	require.NoError(t, err)
	defer a.Close(ctx)
	a.Drop() // its liveness connection breaks; the process lives on
	require.Eventually(t, func() bool { return rescue(t, pool, "other", 0) == 0 && len(jobStates(t, pool)) == 0 }, 10*time.Second, 50*time.Millisecond)
	var n int
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.nodes`).Scan(&n))
		if n > 0 {
			rescue(t, pool, "other", 0)
		}
		return n == 0
	}, 10*time.Second, 50*time.Millisecond)
	re, err := a.Ping(ctx)
	require.NoError(t, err)
	require.NotNil(t, re)
	require.True(t, re.TakenForDead)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.nodes WHERE client_id = 'a'`).Scan(&n))
	require.Equal(t, 1, n)

	insertRunningJob(t, pool, "a")
	require.Zero(t, rescue(t, pool, "other", 0), "a holds its lock again")
	a.Drop()
	require.Eventually(t, func() bool { return rescue(t, pool, "other", 0) == 1 }, 10*time.Second, 50*time.Millisecond)
}

// TestRescueReleasesADeadLeader: a dead node's River leadership is resigned
// for it, with the notice River's electors wake on, while a live leader's
// term is left alone.
func TestRescueReleasesADeadLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	dead, err := store.RegisterNode(ctx, url, "dead-leader")
	require.NoError(t, err)
	elect := func(client string) {
		_, err := pool.Exec(ctx, `
			INSERT INTO river.river_leader (elected_at, expires_at, leader_id) VALUES (now(), now() + interval '15 seconds', $1)
			ON CONFLICT (name) DO UPDATE SET leader_id = EXCLUDED.leader_id, expires_at = EXCLUDED.expires_at`, client)
		require.NoError(t, err)
	}
	leader := func() string {
		var id string
		err := pool.QueryRow(ctx, `SELECT leader_id FROM river.river_leader`).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ""
		}
		require.NoError(t, err)
		return id
	}
	listener, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer listener.Close(ctx)
	_, err = listener.Exec(ctx, `LISTEN "river.river_leadership"`)
	require.NoError(t, err)

	elect("dead-leader")
	live, err := store.RegisterNode(ctx, url, "live-node")
	require.NoError(t, err)
	defer live.Close(ctx)
	_, err = store.RescueDeadNodes(ctx, pool, "", 0)
	require.NoError(t, err)
	require.Equal(t, "dead-leader", leader(), "its node still holds its liveness lock")

	dead.Drop()
	require.Eventually(t, func() bool {
		_, err := store.RescueDeadNodes(ctx, pool, "", 0)
		require.NoError(t, err)
		return leader() == ""
	}, 10*time.Second, 50*time.Millisecond, "the dead node's term ends with it, not at its TTL")
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	require.NoError(t, err, "River's electors are told the leader resigned")
	require.JSONEq(t, `{"action":"resigned","leader_id":"dead-leader"}`, n.Payload)

	// A live leader is never resigned by another node's rescue.
	elect("live-node")
	_, err = store.RescueDeadNodes(ctx, pool, "", 0)
	require.NoError(t, err)
	require.Equal(t, "live-node", leader())
}

// TestCutConnectionIsNotDeath: a node whose liveness connection was cut
// (here pg_terminate_backend) but whose process lives is only suspected:
// it takes its lock again (Ping) and is never rescued; a node that stays
// away past the grace is. A node on this host whose pid is gone is dead at
// once, without the grace.
func TestCutConnectionIsNotDeath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	cut := func(n *store.Node) {
		t.Helper()
		_, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted`, n.ID)
		require.NoError(t, err)
		// The backend exits (and frees the lock) a moment later.
		require.Eventually(t, func() bool {
			var held bool
			require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted)`,
				n.ID).Scan(&held))
			return !held
		}, 10*time.Second, 10*time.Millisecond)
	}
	// Another machine's process: its pid means nothing here.
	away, err := store.RegisterNode(ctx, url, "away-client")
	require.NoError(t, err)
	defer away.Close(ctx)
	_, err = pool.Exec(ctx, `UPDATE rflow.nodes SET host_identity = 'elsewhere' WHERE id = $1`, away.ID)
	require.NoError(t, err)
	insertRunningJob(t, pool, "away-client")

	const grace = 2 * time.Second
	for range 3 {
		cut(away)
		time.Sleep(100 * time.Millisecond)
		require.Zero(t, rescue(t, pool, "", grace), "a lock just lost is a suspicion, not a death")
		re, err := away.Ping(ctx)
		require.NoError(t, err)
		require.NotNil(t, re, "the node reconnected")
		require.False(t, re.TakenForDead)
		time.Sleep(grace / 2)
		require.Zero(t, rescue(t, pool, "", grace), "it took its lock back")
	}
	require.Equal(t, []string{"away-client:running"}, jobStates(t, pool))

	cut(away)
	require.Zero(t, rescue(t, pool, "", grace))
	time.Sleep(grace + 500*time.Millisecond)
	require.Equal(t, 1, rescue(t, pool, "", grace), "away past the grace: dead")
	require.Equal(t, []string{"away-client:available"}, jobStates(t, pool))

	// A process of this host that is gone: dead at once.
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	here, err := store.RegisterNode(ctx, url, "here-client")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE rflow.nodes SET pid = $2 WHERE id = $1`, here.ID, gone.Process.Pid)
	require.NoError(t, err)
	insertRunningJob(t, pool, "here-client")
	here.Drop()
	require.Eventually(t, func() bool { return rescue(t, pool, "", time.Hour) == 1 }, 10*time.Second, 50*time.Millisecond,
		"no process with its pid on this host: rescued without waiting the grace")
}
