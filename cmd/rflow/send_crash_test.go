package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
