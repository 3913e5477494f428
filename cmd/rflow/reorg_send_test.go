package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const reorgSendProject = `
name: reorgs
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}", confirmations: 3 }
      - id: after
        http_call: { method: POST, url: "%s/after" }
`

// TestReorgDuringSendRetrackingSendsOnce mines two runs' sends, orphans
// both blocks with a reorg, and SIGKILLs `rflow start` while the relayer
// tracks them again. Dropped by the reorg: before the bytes go out again
// (relayer.orphaned) and after the first re-send, before the lost block is
// journaled (relayer.after-resend). Re-included by the new chain: when the
// first send reaches its depth there, before it is final
// (relayer.before-final). After a restart each run
// resumes once, at real depth on the new chain, with the new block in its
// journal, and each step made exactly one transaction (the wallet's nonce
// moved by one per send, the recipient was paid once per run).
func TestReorgDuringSendRetrackingSendsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		point     string
		reinclude bool
	}{{"relayer.orphaned", false}, {"relayer.after-resend", false}, {"relayer.before-final", true}} {
		point := tc.point
		name := "dropped/" + point
		if tc.reinclude {
			name = "reincluded/" + point
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			node := anviltest.Start(t, anviltest.Options{})
			eth := node.Client()
			_, from := anviltest.Key(t, 2)
			dead := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
			s := newSink(t)
			config := filepath.Join(t.TempDir(), "rflow.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(reorgSendProject, node.URL, "0x"+anviltest.DevKeys[2], s.URL)), 0o644))
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
			var lowest int64
			var hashes []string
			require.Eventually(t, func() bool {
				var mined int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), COALESCE(min(mined_block), 0),
						COALESCE(array_agg(tx_hash ORDER BY mined_block), '{}') FROM relayer.transactions
					WHERE status = 'mined'`).Scan(&mined, &lowest, &hashes))
				return mined == sends
			}, 60*time.Second, 50*time.Millisecond, "sends not mined; output:\n%s", p.out)
			// Both blocks go; the new ones hold neither send, or both in
			// the last new block.
			head := node.BlockNumber()
			depth := int(head) - int(lowest) + 1
			txs := []anviltest.ReorgTx{{Raw: filler(t, eth)}}
			if tc.reinclude {
				for _, h := range hashes {
					tx, _, err := eth.TransactionByHash(ctx, common.HexToHash(h))
					require.NoError(t, err)
					raw, err := tx.MarshalBinary()
					require.NoError(t, err)
					txs = append(txs, anviltest.ReorgTx{Raw: raw, Block: depth - 1})
				}
			}
			node.ReorgWith(depth, txs...)
			if tc.reinclude {
				// Tracked on the new chain first, then mined to depth.
				require.Eventually(t, func() bool {
					var moved int
					require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relayer.orphaned_receipts`).Scan(&moved))
					return moved == sends
				}, 60*time.Second, 50*time.Millisecond, "sends not tracked on the new chain; output:\n%s", p.out)
				var final int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions WHERE status = 'confirmed'`).Scan(&final))
				require.Zero(t, final, "final before depth on the new chain")
				node.Mine(3)
			}
			p.waitKilled(t, 60*time.Second)

			p = startRflow(t, dbURL, config, "")
			stop := make(chan struct{})
			mined := make(chan struct{})
			go func() {
				defer close(mined)
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
			<-mined
			p.stop(t)
			require.Len(t, runs, sends)

			nonceAfter, err := eth.NonceAt(ctx, from, nil)
			require.NoError(t, err)
			require.Equal(t, nonceBefore+sends, nonceAfter, "exactly one transaction per send")
			paidAfter, err := eth.BalanceAt(ctx, dead, nil)
			require.NoError(t, err)
			require.Equal(t, new(big.Int).Mul(big.NewInt(sends), big.NewInt(1e9)), new(big.Int).Sub(paidAfter, paidBefore))

			rows, err := pool.Query(ctx, `SELECT t.status, t.mined_block, t.mined_block_hash, t.tx_hash,
					(SELECT count(*) FROM relayer.broadcasts b WHERE b.tx_id = t.tx_id),
					(SELECT count(*) FROM relayer.orphaned_receipts o WHERE o.tx_id = t.tx_id),
					(SELECT count(*) FROM relayer.orphaned_receipts o WHERE o.tx_id = t.tx_id AND o.hash = t.tx_hash)
				FROM relayer.transactions t`)
			require.NoError(t, err)
			n := 0
			for rows.Next() {
				var status, blockHash, hash string
				var block int64
				var broadcasts, orphans, sameHash int
				require.NoError(t, rows.Scan(&status, &block, &blockHash, &hash, &broadcasts, &orphans, &sameHash))
				require.Equal(t, "confirmed", status)
				require.Equal(t, 1, broadcasts, "never re-signed")
				require.Equal(t, 1, orphans, "the lost block is journaled")
				require.Equal(t, 1, sameHash)
				h, err := eth.HeaderByNumber(ctx, big.NewInt(block))
				require.NoError(t, err)
				require.Equal(t, h.Hash().Hex(), blockHash, "confirmed in a canonical block")
				n++
			}
			require.NoError(t, rows.Err())
			require.Equal(t, sends, n)

			seen := s.counts()
			for _, r := range runs {
				require.Equal(t, 1, seen[r.ID.String()+":after"], "run %s resumed once", r.ID)
				steps, err := store.RunSteps(ctx, pool, r.ID)
				require.NoError(t, err)
				require.Equal(t, store.StepCompleted, steps[0].Status)
				var out struct {
					Status    string `json:"status"`
					Block     int64  `json:"block"`
					BlockHash string `json:"block_hash"`
				}
				require.NoError(t, json.Unmarshal(steps[0].Output, &out))
				require.Equal(t, "confirmed", out.Status)
				h, err := eth.HeaderByNumber(ctx, big.NewInt(out.Block))
				require.NoError(t, err)
				require.Equal(t, h.Hash().Hex(), out.BlockHash, "the step journals the new block")
			}
		})
	}
}

// filler signs a 0-value self-transfer from dev key 3 (not the project's
// wallet) for a reorg's new blocks, so they differ from the ones replaced.
func filler(t *testing.T, eth *ethclient.Client) []byte {
	t.Helper()
	ctx := context.Background()
	key, from := anviltest.Key(t, 3)
	n, err := eth.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	head, err := eth.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	tip := big.NewInt(1e9)
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(anviltest.ChainID), Nonce: n, GasTipCap: tip,
		GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(3)), tip), Gas: 21000, To: &from, Value: new(big.Int)})
	tx, err = types.SignTx(tx, types.LatestSignerForChainID(big.NewInt(anviltest.ChainID)), key)
	require.NoError(t, err)
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	return raw
}
