package main

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
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
			node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
			_, from := anviltest.Key(t, 2)
			config := filepath.Join(t.TempDir(), "rflow.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(sendProject, node.URL, "0x"+anviltest.DevKeys[2])), 0o644))
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(ctx, dbURL)
			require.NoError(t, err)
			defer pool.Close()
			before, err := node.Client().NonceAt(ctx, from, nil)
			require.NoError(t, err)

			const sends = 3
			enqueueManual(t, pool, config, sends)
			startRflowWorkers(t, dbURL, config, point, 1).waitKilled(t, 60*time.Second)
			p := startRflow(t, dbURL, config, "")
			runs := waitAllDone(t, pool, sends, 90*time.Second)
			p.stop(t)
			require.Len(t, runs, sends)

			after, err := node.Client().NonceAt(ctx, from, nil)
			require.NoError(t, err)
			require.Equal(t, before+sends, after, "exactly one transaction per send")
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
			node := anviltest.Start(t, anviltest.Options{})
			_, from := anviltest.Key(t, 3)
			config := filepath.Join(t.TempDir(), "rflow.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(sendProject, node.URL, "0x"+anviltest.DevKeys[3])), 0o644))
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(ctx, dbURL)
			require.NoError(t, err)
			defer pool.Close()
			dead := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
			paid, err := node.Client().BalanceAt(ctx, dead, nil)
			require.NoError(t, err)

			const sends = 16
			enqueueManual(t, pool, config, sends)
			startRflowWorkers(t, dbURL, config, point, 50).waitKilled(t, 60*time.Second)
			p := startRflow(t, dbURL, config, "")
			runs := waitAllDone(t, pool, sends, 90*time.Second)
			p.stop(t)
			require.Len(t, runs, sends)

			used, err := node.Client().NonceAt(ctx, from, nil)
			require.NoError(t, err)
			require.Equal(t, uint64(sends), used, "exactly one transaction per send")
			now, err := node.Client().BalanceAt(ctx, dead, nil)
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
