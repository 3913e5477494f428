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
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestReorgDeeperThanConfirmationsResendsOnce: two runs' sends are
// confirmed (3 deep) and their runs completed; then a reorg deeper than
// that drops both blocks. The reorg's transaction hands the confirmed
// sends back to the relayer, and `rflow start` is SIGKILLed while it
// re-sends them: before the bytes go out again (relayer.orphaned) and after
// the first re-send, before the lost block is journaled
// (relayer.after-resend). After a restart both are confirmed again on the
// new chain with their own bytes: the wallet's nonce moved by one per send
// and the recipient was paid once per run, never zero times.
// reorgRetrackProject is reorgSendProject's pipeline plus an event
// workflow whose only purpose is to run the head tracker (which records
// the reorg); its contract emits nothing.
const reorgRetrackProject = `
name: reorgs
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
contracts:
  - { name: Vault, abi: %q, network: local, address: %q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}", confirmations: 3 }
      - id: after
        http_call: { method: POST, url: "%s/after" }
  - name: watch
    trigger: { event: { contract: Vault, event: Deposit } }
    steps:
      - { id: a, noop: {} }
`

func TestReorgDeeperThanConfirmationsResendsOnce(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"relayer.orphaned", "relayer.after-resend"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			node := anviltest.Start(t, anviltest.Options{})
			eth := node.Client()
			_, from := anviltest.Key(t, 2)
			dead := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
			s := newSink(t)
			config := filepath.Join(t.TempDir(), "rflow.yaml")
			em := anviltest.DeployEmitter(t, node)
			abiPath, err := filepath.Abs("../../testdata/contracts/Emitter.abi.json")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(reorgRetrackProject, node.URL, "0x"+anviltest.DevKeys[2],
				abiPath, em.Address.Hex(), s.URL)), 0o644))
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(ctx, dbURL)
			require.NoError(t, err)
			defer pool.Close()
			nonceBefore, err := eth.NonceAt(ctx, from, nil)
			require.NoError(t, err)
			paidBefore, err := eth.BalanceAt(ctx, dead, nil)
			require.NoError(t, err)

			const sends = 2
			enqueueManual(t, pool, config, sends)
			p := startRflow(t, dbURL, config, point)
			stop := make(chan struct{})
			mining := make(chan struct{})
			go func() {
				defer close(mining)
				for {
					select {
					case <-stop:
						return
					case <-time.After(300 * time.Millisecond):
						node.Mine(1)
					}
				}
			}()
			runs := waitAllDone(t, pool, sends, 90*time.Second)
			close(stop)
			<-mining
			var lowest int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT min(mined_block) FROM relayer.transactions WHERE status = 'confirmed'`).Scan(&lowest))
			head := node.BlockNumber()
			require.Eventually(t, func() bool {
				var n int
				return pool.QueryRow(ctx, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, head).Scan(&n) == nil && n == 1
			}, 20*time.Second, 50*time.Millisecond, "the window at the tip")
			node.ReorgWith(int(head)-int(lowest)+1, anviltest.ReorgTx{Raw: filler(t, eth)})
			p.waitKilled(t, 60*time.Second)

			p = startRflow(t, dbURL, config, "")
			defer p.stop(t)
			stop, mining = make(chan struct{}), make(chan struct{})
			go func() {
				defer close(mining)
				for {
					select {
					case <-stop:
						return
					case <-time.After(300 * time.Millisecond):
						node.Mine(1)
					}
				}
			}()
			require.Eventually(t, func() bool {
				var n int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions t WHERE t.status = 'confirmed'
					AND EXISTS (SELECT 1 FROM relayer.orphaned_receipts o WHERE o.tx_id = t.tx_id)`).Scan(&n))
				return n == sends
			}, 90*time.Second, 100*time.Millisecond, "sends not confirmed again; output:\n%s", p.out)
			close(stop)
			<-mining

			nonceAfter, err := eth.NonceAt(ctx, from, nil)
			require.NoError(t, err)
			require.Equal(t, nonceBefore+sends, nonceAfter, "exactly one transaction per send")
			paidAfter, err := eth.BalanceAt(ctx, dead, nil)
			require.NoError(t, err)
			require.Equal(t, new(big.Int).Mul(big.NewInt(sends), big.NewInt(1e9)), new(big.Int).Sub(paidAfter, paidBefore),
				"paid once per run on the new chain")
			var broadcasts, orphans int
			require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM relayer.broadcasts),
				(SELECT count(*) FROM relayer.orphaned_receipts)`).Scan(&broadcasts, &orphans))
			require.Equal(t, sends, broadcasts, "never re-signed")
			require.Equal(t, sends, orphans, "each lost block journaled once")
			seen := s.counts()
			for _, r := range runs {
				require.Equal(t, 1, seen[r.ID.String()+":after"], "run %s went on once", r.ID)
			}
		})
	}
}
