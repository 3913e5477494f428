package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestGaugesNonceGapsAndLag: a wallet with sends in flight above a nonce
// nobody holds reports that hole (and not the confirmed ones below, nor a
// wallet with nothing in flight); a cursor behind the head reports the
// blocks and the age of its first unclaimed block, and is stalled only
// once the head moved on while it stood still.
func TestGaugesNonceGapsAndLag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO relayer.nonces (address, chain_id, next_nonce) VALUES ('0xaa', 1, 8), ('0xbb', 1, 3)`)
	tx := func(n int, from string, nonce int64, status string) {
		exec(`INSERT INTO relayer.transactions (tx_id, external_id, wallet, chain_id, from_address, to_address, nonce, status)
			VALUES (gen_random_uuid(), $1, 'ops', 1, $2, '0xdead', $3, $4)`, "x"+string(rune('a'+n)), from, nonce, status)
	}
	tx(0, "0xaa", 0, "confirmed")
	tx(1, "0xaa", 1, "confirmed")
	tx(2, "0xaa", 2, "failed") // its nonce was released: a hole at 2
	tx(3, "0xaa", 3, "pending")
	tx(4, "0xaa", 5, "in_mempool") // and one at 4
	tx(5, "0xbb", 0, "confirmed")
	tx(6, "0xbb", 1, "failed") // nothing in flight above it: no stall

	exec(`INSERT INTO indexer.blocks (chain_id, number, hash, parent_hash, seen_at)
		SELECT 1, n, 'h' || n, 'h' || (n - 1), now() - make_interval(mins => 100 - n) FROM generate_series(90, 100) n`)
	// behind stood still while blocks 96..100 arrived over 4 minutes;
	// current is at the head; deep waits for its confirmations and moved
	// after the last block; woke had nothing to do for 10 minutes (an idle
	// chain) and block 100 arrived just now.
	exec(`INSERT INTO indexer.cursors (task, phase, chain_id, block, updated_at) VALUES
		('event/behind', 'head', 1, 95, now() - interval '10 minutes'),
		('event/current', 'head', 1, 100, now() - interval '10 minutes'),
		('event/deep', 'confirmed', 1, 97, now() - interval '10 seconds'),
		('event/woke', 'head', 1, 99, now() - interval '10 minutes')`)
	// The node already reports block 103 while the window trails it.
	exec(`INSERT INTO rflow.leases (name, owner, token, expires_at) VALUES ('proj/head/1', 'p1', 3, now() + interval '1 minute'),
		('proj/event/behind', 'p2', 7, now() + interval '1 minute')`)
	exec(`INSERT INTO indexer.heads (chain_id, network, lease, lease_token, node_head, node_head_time, polled_at)
		VALUES (1, 'main', 'proj/head/1', 3, 103, now(), now())`)

	// A rehearsal's runs are no live workflow's: they would add a label
	// per session to rflow_runs.
	rehearsal := store.Rehearsal{Kind: store.RehearsalReplay, Session: "s1", Workflow: "wf"}.Name()
	for _, name := range []string{"wf", rehearsal} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := store.DeployWorkflow(ctx, tx, name, "h", []byte(`{"name":"wf"}`)); err != nil {
				return err
			}
			_, err := store.ClaimRuns(ctx, tx, []store.Claim{{Workflow: name, TriggerKey: "k", TriggerKind: "manual", Trigger: []byte(`{}`)}})
			return err
		})
		require.NoError(t, err)
	}

	g, err := store.ReadGauges(ctx, pool, store.Namespace{})
	require.NoError(t, err)
	var runWorkflows []string
	for _, r := range g.Runs {
		runWorkflows = append(runWorkflows, r.Labels[0])
	}
	require.Equal(t, []string{"wf"}, runWorkflows, "rehearsal runs are not in the live gauges")
	var failedWorkflows []string
	for _, f := range g.Failed {
		failedWorkflows = append(failedWorkflows, f.Labels[0])
	}
	require.Equal(t, []string{"wf"}, failedWorkflows, "nor are rehearsal workflows")
	gaps := map[string]int64{}
	for _, n := range g.NonceGaps {
		gaps[n.Address] = n.Gaps
	}
	require.Equal(t, map[string]int64{"0xaa": 2, "0xbb": 0}, gaps)
	require.Len(t, g.Transactions, 2, "in-flight sends only: %v", g.Transactions)

	lags := map[string]store.CursorLag{}
	for _, c := range g.Cursors {
		lags[c.Task] = c
	}
	behind := lags["event/behind"]
	require.Equal(t, int64(103), behind.Head, "the node's head counts when the window trails it")
	require.Equal(t, int64(95), behind.Block)
	require.InDelta(t, 4*time.Minute, behind.Behind, float64(5*time.Second), "block 96 was seen 4m ago")
	require.InDelta(t, 4*time.Minute, behind.Waiting, float64(5*time.Second))
	require.True(t, behind.Stalled(time.Minute), "the head moved for minutes while it stood still")
	require.False(t, behind.Stalled(time.Hour))
	require.Equal(t, "p2", behind.Holder, "the holder of proj/event/behind")
	require.True(t, behind.LeaseLive)
	current := lags["event/current"]
	require.Zero(t, current.Behind)
	require.Empty(t, current.Holder)
	require.False(t, current.Stalled(time.Minute), "at the head: an idle chain is not a stuck trigger")
	require.False(t, lags["event/deep"].Stalled(time.Minute), "a cursor waiting for confirmations on a quiet chain")
	require.False(t, lags["event/woke"].Stalled(time.Minute), "a block that arrived just now after an idle spell")

	heads, err := store.HeadProgresses(ctx, pool)
	require.NoError(t, err)
	require.Len(t, heads, 1)
	h := heads[0]
	require.Equal(t, "main", h.Network)
	require.Equal(t, int64(100), h.Window)
	require.Equal(t, int64(103), h.NodeHead)
	require.Equal(t, int64(103), h.Head())
	require.Less(t, h.WindowAge, 5*time.Second, "block 100 was seen just now")
	require.True(t, h.Polled)
	require.Equal(t, "p1", h.Holder)
	require.True(t, h.LeaseLive)
}
