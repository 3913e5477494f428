package main

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const waitProject = `
name: waits
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: saga
    trigger: { event: { contract: Vault, event: Deposit, where: "${{ event.amount < 90 }}" } }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.event.amount }}" }
          confirmations: 2
      - id: tell
        http_call: { method: POST, url: "%[3]s/tell", body: { tx: "${{ steps.claimed.output.tx_hash }}" } }
  - name: expire
    trigger: { event: { contract: Vault, event: Deposit, where: "${{ event.amount >= 90 }}" } }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.event.amount }}" }
          timeout: 6s
          on_timeout: { goto: remind }
      - id: tell
        http_call: { method: POST, url: "%[3]s/tell" }
      - id: remind
        if: "${{ steps.claimed.output.timed_out == true }}"
        http_call: { method: POST, url: "%[3]s/remind" }
`

// TestCrashWithParkedWaits SIGKILLs `rflow start` while runs are parked on
// wait_for steps; matching events (and a Deposit with its Claimed) land
// during the downtime and a wait's deadline passes; the next start dies
// inside the transaction that settles a match; the one after finishes.
// Every wait settles exactly once: each run's next step reached the
// endpoint once, with the transaction of its own Claimed event, and the
// expired wait jumped to its on_timeout step once.
func TestCrashWithParkedWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	s := newSink(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(waitProject, node.URL, em.Address.Hex(), s.URL)), 0o644))
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()

	claim := func(amount int64) string {
		return em.Transact("claim", big.NewInt(amount)).TxHash.Hex()
	}
	p1 := startRflow(t, dbURL, config, "")
	waitFeed(t, pool)
	for _, a := range []int64{1, 2, 3, 95} {
		em.Deposit(a)
	}
	node.Mine(2)
	parked := waitsIn(t, pool, 4, store.WaitWaiting)
	txs := map[int64]string{1: claim(1)}
	node.Mine(3)
	require.Eventually(t, func() bool { return s.counts()[parked[1].String()+":tell"] == 1 }, 30*time.Second, 50*time.Millisecond,
		"the first match resumes its run")
	// Kill only once that call is journaled: a kill while it is in flight
	// would rightly repeat it under the same Idempotency-Key (http_call is
	// at-least-once), which is not what this test measures.
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.step_runs WHERE run_id = $1 AND step_id = 'tell' AND status = 'completed'`,
			parked[1]).Scan(&n)
		return err == nil && n == 1
	}, 30*time.Second, 20*time.Millisecond, "the resumed run's call is journaled")
	p1.kill()

	// Down: a parked wait's event, a new Deposit with its Claimed, and the
	// expiring wait's deadline.
	txs[2] = claim(2)
	em.Deposit(4)
	txs[4] = claim(4)
	node.Mine(3)
	time.Sleep(6 * time.Second)

	startRflow(t, dbURL, config, jobs.FaultAfterWaitSettle).waitKilled(t, 60*time.Second)
	p3 := startRflow(t, dbURL, config, "")
	txs[3] = claim(3)
	node.Mine(3)
	runs := waitAllDone(t, pool, 5, 90*time.Second)
	p3.stop(t)
	require.Len(t, runs, 5)

	show := func(id uuid.UUID) string {
		out, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "show", id.String(), "-c", config)
		require.Equal(t, 0, code, stderr)
		return out
	}
	seen := s.counts()
	for _, r := range runs {
		ws, err := store.RunWaits(ctx, pool, r.ID)
		require.NoError(t, err)
		require.Len(t, ws, 1, "run %s", r.ID)
		w := ws[0]
		steps, err := store.RunSteps(ctx, pool, r.ID)
		require.NoError(t, err)
		if r.Workflow == "expire" {
			require.Equal(t, store.WaitTimedOut, w.Status)
			require.Equal(t, 1, seen[r.ID.String()+":remind@1"], "the on_timeout target ran once (a jump starts epoch 1): %v", seen)
			require.Zero(t, seen[r.ID.String()+":tell"])
			out := show(r.ID)
			require.Contains(t, out, "wait      claimed (attempt 1): timed_out")
			require.Contains(t, out, "then goto:remind")
			continue
		}
		require.Equal(t, store.WaitMatched, w.Status, "run %s", r.ID)
		require.Equal(t, 1, seen[r.ID.String()+":tell"], "run %s resumed exactly once", r.ID)
		var amount int64
		for _, st := range steps {
			if st.StepID == "claimed" {
				require.Equal(t, store.StepCompleted, st.Status)
				require.Contains(t, string(st.Output), `"amount": `)
			}
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT (trigger->'event'->>'amount')::bigint FROM rflow.workflow_runs WHERE id = $1`,
			r.ID).Scan(&amount))
		require.Contains(t, string(w.EventData), txs[amount], "run of amount %d matched its own Claimed", amount)
		out := show(r.ID)
		require.Contains(t, out, "wait      claimed (attempt 1): matched")
		require.Contains(t, out, "awaits  Vault.Claimed where ${{ event.amount == trigger.event.amount }} on chain 31337, 2 confirmation(s)")
		require.Contains(t, out, txs[amount])
	}
	for k, n := range seen {
		require.Equal(t, 1, n, "request %s delivered %d times", k, n)
	}
}

// waitFeed waits until a wait feed's cursor exists (the process follows the
// awaited event).
func waitFeed(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM indexer.cursors WHERE task LIKE 'wait/%'`).Scan(&n)
		return err == nil && n > 0
	}, 60*time.Second, 100*time.Millisecond, "no wait feed started")
}

// waitsIn waits for n waits in status and returns their runs, by amount of
// the triggering Deposit.
func waitsIn(t *testing.T, pool *pgxpool.Pool, n int, status store.WaitStatus) map[int64]uuid.UUID {
	t.Helper()
	out := map[int64]uuid.UUID{}
	require.Eventually(t, func() bool {
		rows, err := pool.Query(context.Background(), `
			SELECT (r.trigger->'event'->>'amount')::bigint, r.id FROM rflow.waits w
			JOIN rflow.workflow_runs r ON r.id = w.run_id WHERE w.status = $1`, string(status))
		if err != nil {
			return false
		}
		defer rows.Close()
		clear(out)
		for rows.Next() {
			var a int64
			var id uuid.UUID
			if rows.Scan(&a, &id) != nil {
				return false
			}
			out[a] = id
		}
		return len(out) == n
	}, 60*time.Second, 100*time.Millisecond, "waits never parked")
	return out
}
