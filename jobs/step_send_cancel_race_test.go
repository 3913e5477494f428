package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// budgetedSendProject is sendProject with the send under a budget, whose
// reservation the relayer's finalising transaction settles.
const budgetedSendProject = `
name: cancels
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1 }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pay
    trigger: { manual: {} }
    budgets: [{ name: petty, asset: native, cap: "3 gwei", window: 1h }]
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: %q, value: "${{ gwei(1) }}", budget: petty }
        %s
`

// TestCancelWhileSendFinalisesDoesNotDeadlock: a run's cancel and the
// relayer finalising the run's send lock the same two rows, the run and
// the send. The test makes them overlap every time. The wallet holds the
// value but not the gas, so the node refuses the send and the relayer
// finalises it failed, releasing its budget reservation; the test holds
// that reservation's row lock, lets the node answer, waits until the
// finaliser is blocked on the reservation, starts the cancel, waits until
// it is blocked too, then lets go. Taking the two rows in opposite orders,
// Postgres aborts one transaction with 40P01 ("deadlock detected"). In one
// order the cancel waits for the finaliser: the run fails with the
// refusal, the cancel answers that it already failed, and the refused
// nonce is handed back.
func TestCancelWhileSendFinalisesDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	proxy := rpcproxy.Start(t, node.URL)
	holdMethod(proxy, "eth_estimateGas", true)
	b := startSendProject(t, node, proxy.URL, big.NewInt(10_000_000_000_000), budgetedSendProject, "") // the value, not the gas

	id := b.manual(t, "pay", "cancel-race", nil)
	b.waitTx(t, id, "queued", func(r relayerTx) bool { return r.status == store.RelayerPending && r.nonce == nil })
	require.Eventually(t, func() bool { return proxy.Calls("eth_estimateGas") > 0 }, 30*time.Second, 20*time.Millisecond)
	ext := fmt.Sprintf("rflow:%s:pay:1", id)

	hold, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	var reservation string
	require.NoError(t, hold.QueryRow(ctx, `SELECT status FROM rflow.budget_reservations
		WHERE external_id = $1 FOR UPDATE`, ext).Scan(&reservation))
	require.Equal(t, string(store.BudgetSpent), reservation, "handed to the relayer, so a refusal releases it")

	holdMethod(proxy, "eth_estimateGas", false)
	waitLockWaiters(t, b.pool, 1, "the finaliser blocked on the reservation")
	cancelled := make(chan error, 1)
	go func() {
		cancelled <- pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := jobs.CancelRun(ctx, tx, id)
			return err
		})
	}()
	waitLockWaiters(t, b.pool, 2, "the cancel blocked too")
	require.NoError(t, hold.Rollback(ctx))

	var cerr error
	select {
	case cerr = <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the cancel never returned")
	}
	var pgErr *pgconn.PgError
	if errors.As(cerr, &pgErr) {
		require.NotEqual(t, "40P01", pgErr.Code, "the cancel deadlocked with the finaliser: %v", cerr)
	}
	require.ErrorContains(t, cerr, "is already failed", "the finaliser went first; the cancel sees its outcome")

	run := b.waitRun(t, id)
	require.Equal(t, store.RunFailed, run.Status)
	require.Contains(t, *run.Error, "insufficient funds")
	got := b.waitTx(t, id, "failed", func(r relayerTx) bool { return r.status == store.RelayerFailed })
	require.Zero(t, got.noops)
	var next int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT next_nonce FROM relayer.nonces WHERE lower(address) = lower($1)`,
		b.from.Hex()).Scan(&next))
	require.Zero(t, next, "the refused nonce is handed back")
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM rflow.budget_reservations WHERE external_id = $1`,
		ext).Scan(&reservation))
	require.Equal(t, string(store.BudgetReleased), reservation)
	var deadlocks int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job j, unnest(j.errors) e
		WHERE j.kind = 'relayer_send' AND e->>'error' LIKE '%deadlock%'`).Scan(&deadlocks))
	require.Zero(t, deadlocks, "the relayer's finalising transaction deadlocked")
}

// waitLockWaiters waits until n sessions of the test's database wait for a
// row lock.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, n int, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		return waiting >= n
	}, 30*time.Second, 10*time.Millisecond, what)
}

// TestCancelRacingMinedSendsStaysConsistent races `runs cancel` against the
// block that mines the run's send, at staggered offsets, many times: no
// cancel or relayer transaction is aborted as a deadlock, and each run ends
// one consistent way: cancelled with a note matching its send (the
// original mined after all, or the no-op won), or completed with the send
// confirmed and the cancel answering so. Every nonce is used once.
func TestCancelRacingMinedSendsStaysConsistent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{NoMining: true})
	b := startSend(t, node, node.URL, big.NewInt(1e18), "")
	const rounds = 8
	for i := range rounds {
		id := b.manual(t, "pay", fmt.Sprintf("race-%d", i), nil)
		b.waitTx(t, id, "in the mempool", func(r relayerTx) bool { return r.status == store.RelayerInMempool })
		mined := make(chan struct{})
		go func() {
			defer close(mined)
			time.Sleep(time.Duration(i%4) * 15 * time.Millisecond)
			node.Mine(1)
		}()
		time.Sleep(time.Duration(3-i%4) * 15 * time.Millisecond)
		cerr := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := jobs.CancelRun(ctx, tx, id)
			return err
		})
		<-mined
		var pgErr *pgconn.PgError
		if errors.As(cerr, &pgErr) {
			require.NotEqual(t, "40P01", pgErr.Code, "round %d: the cancel deadlocked: %v", i, cerr)
		}
		run := b.waitRun(t, id)
		got := b.waitTx(t, id, "final", func(r relayerTx) bool {
			return r.status == store.RelayerConfirmed || r.status == store.RelayerCancelled
		})
		if cerr != nil {
			require.ErrorContains(t, cerr, "is already completed", "round %d", i)
			require.Equal(t, store.RunCompleted, run.Status, "round %d", i)
			require.Equal(t, store.RelayerConfirmed, got.status, "round %d", i)
			continue
		}
		require.Equal(t, store.RunCancelled, run.Status, "round %d", i)
		want := "cancel: too late, the original was mined"
		if got.status == store.RelayerCancelled {
			want = "cancel: the no-op replacement was mined"
		}
		require.Eventually(t, func() bool {
			s := b.steps(t, id)["pay"]
			return s.Error != nil && strings.Contains(*s.Error, want)
		}, 10*time.Second, 20*time.Millisecond, "round %d: the step's note says %q", i, want)
	}
	nonce, err := node.Client().NonceAt(ctx, b.from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(rounds), nonce, "one transaction mined per run")
	var next int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT next_nonce FROM relayer.nonces WHERE lower(address) = lower($1)`,
		b.from.Hex()).Scan(&next))
	require.Equal(t, int64(rounds), next)
	var deadlocks int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job j, unnest(j.errors) e
		WHERE j.kind = 'relayer_send' AND e->>'error' LIKE '%deadlock%'`).Scan(&deadlocks))
	require.Zero(t, deadlocks, "a relayer finalising transaction deadlocked")
}
