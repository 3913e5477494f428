package main

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const sendProject = `
name: sends
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}" }
`

// sendCrash is a crash test of sends through `rflow start`: sends manual
// runs of sendProject from dev key key, a process with workers killed at
// point, then a restart.
type sendCrash struct {
	node    anviltest.Options
	key     int
	point   string
	workers int
	sends   int
}

// run carries c out and checks every run is done and the wallet's nonce
// moved by one per send. It returns the runs, and a pool and the node for
// the caller's own checks, and how much 0xdEaD held before.
func (c sendCrash) run(t *testing.T) ([]*store.Run, *pgxpool.Pool, *anviltest.Node, *big.Int) {
	t.Helper()
	ctx := context.Background()
	node := anviltest.Start(t, c.node)
	_, from := anviltest.Key(t, c.key)
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(sendProject, node.URL, "0x"+anviltest.DevKeys[c.key])), 0o644))
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	before, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)
	paid, err := node.Client().BalanceAt(ctx, deadAddress, nil)
	require.NoError(t, err)

	enqueueManual(t, pool, config, c.sends)
	startRflowWorkers(t, dbURL, config, c.point, c.workers).waitKilled(t, 60*time.Second)
	p := startRflow(t, dbURL, config, "")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("where the sends stand:\n%s\nrestarted rflow's output:\n%s", sendsState(pool), p.out)
		}
	})
	runs := waitAllDone(t, pool, c.sends, 90*time.Second)
	p.stop(t)
	require.Len(t, runs, c.sends)

	after, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, before+uint64(c.sends), after, "exactly one transaction per send")
	return runs, pool, node, paid
}

// sendsState lists the runs and the relayer's sends, for a failure message.
func sendsState(pool *pgxpool.Pool) string {
	ctx := context.Background()
	var out strings.Builder
	for _, q := range []string{
		`SELECT r.id || ' ' || r.status || coalesce(' ' || s.status, '') || coalesce(' error: ' || r.error, '')
			FROM rflow.workflow_runs r LEFT JOIN rflow.step_runs s ON s.run_id = r.id ORDER BY r.created_at`,
		`SELECT external_id || ' ' || status || ' nonce ' || coalesce(nonce::text, '-') || ' job ' || coalesce(job_id::text, '-') ||
				coalesce(' error: ' || error, '') FROM relayer.transactions ORDER BY id`,
		`SELECT id || ' ' || kind || ' ' || state || ' attempt ' || attempt || coalesce(' errors: ' || errors::text, '')
			FROM river.river_job WHERE state <> 'completed' ORDER BY id`,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			fmt.Fprintf(&out, "  (%v)\n", err)
			continue
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			fmt.Fprintf(&out, "  (%v)\n", err)
		}
		for _, l := range lines {
			fmt.Fprintf(&out, "  %s\n", l)
		}
	}
	return out.String()
}

var deadAddress = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// TestCrashSendAtEachPoint kills `rflow start` between the send's journal
// and the relayer insert, between the insert and the broadcast, between the
// broadcast and the receipt, and before finality; after a restart every
// send has gone out exactly once: the wallet's nonce moved by one per send.
func TestCrashSendAtEachPoint(t *testing.T) {
	t.Parallel()
	for _, point := range []string{jobs.FaultAfterJournal, "relayer.after-queue", "relayer.after-send", "relayer.before-final"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const sends = 3
			runs, pool, _, _ := sendCrash{node: anviltest.Options{BlockTime: 200 * time.Millisecond}, key: 2, point: point,
				workers: 1, sends: sends}.run(t)
			var txs int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions WHERE status = 'confirmed'`).Scan(&txs))
			require.Equal(t, sends, txs)
			for _, r := range runs {
				steps, err := store.RunSteps(ctx, pool, r.ID)
				require.NoError(t, err)
				require.Equal(t, store.StepCompleted, steps[0].Status)
				require.Contains(t, string(steps[0].Output), `"status": "confirmed"`)
			}
		})
	}
}

// TestCrashSendBurstInsideBatches kills `rflow start`, working a burst of
// sends with rflow's default workers, at the fifth send's point in the
// relayer: its batches have reserved nonces, recorded bytes, sent them, or
// found them mined, for several sends at once. After a restart every run
// is done and every send went out exactly once.
func TestCrashSendBurstInsideBatches(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"relayer.after-nonce:5", "relayer.after-send:5", "relayer.before-final:5"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const sends = 16
			runs, pool, node, paid := sendCrash{key: 3, point: point, workers: 50, sends: sends}.run(t)
			now, err := node.Client().BalanceAt(ctx, deadAddress, nil)
			require.NoError(t, err)
			require.Equal(t, new(big.Int).Mul(big.NewInt(sends), big.NewInt(1e9)).String(), new(big.Int).Sub(now, paid).String(),
				"each send paid once")
			for _, r := range runs {
				steps, err := store.RunSteps(ctx, pool, r.ID)
				require.NoError(t, err)
				require.Equal(t, store.StepCompleted, steps[0].Status, "run %s", r.ID)
			}
		})
	}
}
