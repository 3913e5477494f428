package jobs_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
)

// depositPayProject pays each Deposit's amount, in wei, from the ops wallet to
// payee once the deposit is 2 blocks deep (run_on: confirmed), after a
// delay of wait.
func depositPayProject(chainID int64, url string, em *anviltest.Emitter, payee common.Address, wait string) string {
	return fmt.Sprintf(`
name: pay
networks:
  - { name: local, chain_id: %d, rpc: %q, confirmations: 2, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "${OPS_KEY}" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: pay
    trigger:
      event: { contract: Vault, event: Deposit, run_on: confirmed }
    steps:
      - { id: wait, delay: %s }
      - id: pay
        send: { wallet: ops, network: local, to: %q, value: "${{ event.amount }}" }
`, chainID, url, em.Address.Hex(), wait, payee.Hex())
}

// payBundle is a reorgBundle for payProject, with its payee.
func payBundle(t *testing.T, wait string) (*reorgBundle, common.Address) {
	t.Helper()
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	payee := crypto.PubkeyToAddress(k.PublicKey)
	b := newReorgBundle(t, func(n *anviltest.Node, em *anviltest.Emitter, _ *receiver) string {
		return depositPayProject(anviltest.ChainID, n.URL, em, payee, wait)
	})
	return b, payee
}

func (b *reorgBundle) balance(t *testing.T, a common.Address) int64 {
	t.Helper()
	return balanceOf(t, b.node.Client(), a)
}

func balanceOf(t *testing.T, c *ethclient.Client, a common.Address) int64 {
	t.Helper()
	v, err := c.BalanceAt(context.Background(), a, nil)
	require.NoError(t, err)
	return v.Int64()
}

func (b *reorgBundle) settled(t *testing.T, payee common.Address, want int64, runs int) {
	t.Helper()
	settled(t, b.pool, b.node.Client(), payee, want, runs)
}

// settled waits until payee holds want and every run of the workflow has
// completed, then checks that it stays so while the chain goes on.
func settled(t *testing.T, pool *pgxpool.Pool, c *ethclient.Client, payee common.Address, want int64, runs int) {
	t.Helper()
	ctx := context.Background()
	count := func(q string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, q).Scan(&n))
		return n
	}
	defer func() {
		if t.Failed() { // say what was paid and claimed
			rows, err := pool.Query(ctx, `SELECT external_id, status, coalesce(tx_hash, ''), coalesce(mined_block, 0) FROM relayer.transactions`)
			require.NoError(t, err)
			for rows.Next() {
				var ext, st, h string
				var n int64
				require.NoError(t, rows.Scan(&ext, &st, &h, &n))
				t.Logf("send %s %s %s in block %d", ext, st, h, n)
			}
			rows, err = pool.Query(ctx, `SELECT trigger_key, status, orphaned_at IS NOT NULL FROM rflow.workflow_runs`)
			require.NoError(t, err)
			for rows.Next() {
				var k, st string
				var o bool
				require.NoError(t, rows.Scan(&k, &st, &o))
				t.Logf("run %s %s orphaned=%v", k, st, o)
			}
			t.Logf("payee balance %d", balanceOf(t, c, payee))
		}
	}()
	eventually(t, 90*time.Second, fmt.Sprintf("the payee paid %d wei by %d completed runs", want, runs), func() bool {
		return balanceOf(t, c, payee) == want &&
			count(`SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed' AND orphaned_at IS NULL`) == runs
	})
	time.Sleep(3 * time.Second) // the chain moves on: nothing more is claimed or paid
	require.Equal(t, want, balanceOf(t, c, payee), "paid exactly what is owed")
	require.Equal(t, runs, count(`SELECT count(*) FROM rflow.workflow_runs`), "one run per deposit")
	require.Equal(t, runs, count(`SELECT count(*) FROM relayer.transactions`), "one send per deposit")
}

// TestReorgMovingLogsKeepsTheirRuns is issue 26's reproduction: two
// transactions of three Deposit logs each, in consecutive blocks, each log
// paid once it is 2 blocks deep. The node goes back below both and the
// same two signed transactions return in one block, where the second one's
// logs sit at block log indexes 3..5 instead of 0..2. The same occurrences
// (the same transaction, the same position in it) keep their runs: six
// runs in all, every one re-included, and the payee holds exactly the 21
// wei owed (the relayer gets the orphaned payments mined again, once).
func TestReorgMovingLogsKeepsTheirRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, payee := payBundle(t, "1ms")
	a := b.em.EmitMany(3, 1) // 1, 2, 3
	c := b.em.EmitMany(3, 4) // 4, 5, 6
	require.Equal(t, a.BlockNumber.Uint64()+1, c.BlockNumber.Uint64())
	require.Equal(t, uint(0), c.Logs[0].Index, "the second transaction opens its block")
	stop := b.mining(t)
	b.settled(t, payee, 21, 6)
	keys := map[string]bool{}
	for _, r := range []struct {
		tx   common.Hash
		logs int
	}{{a.TxHash, 3}, {c.TxHash, 3}} {
		for i := 0; i < r.logs; i++ {
			keys[chain.EventKey(anviltest.ChainID, r.tx, uint(i), chain.PhaseConfirmed, false)] = true
		}
	}
	runKeys := func() map[string]bool {
		rows, err := b.pool.Query(ctx, `SELECT trigger_key FROM rflow.workflow_runs`)
		require.NoError(t, err)
		out := map[string]bool{}
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			out[k] = true
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, keys, runKeys())

	// Back below both; the same signed transactions in one new block.
	stop() // the head stays where the reorg's depth is measured
	rawA, rawC := b.node.RawTx(a.TxHash), b.node.RawTx(c.TxHash)
	head := b.node.BlockNumber()
	depth := int(head - a.BlockNumber.Uint64() + 1)
	b.atTip(t)
	b.node.ReorgWith(depth, anviltest.ReorgTx{Raw: rawA, Block: 0}, anviltest.ReorgTx{Raw: rawC, Block: 0})
	moved, err := b.node.Client().TransactionReceipt(ctx, c.TxHash)
	require.NoError(t, err)
	require.Equal(t, a.BlockNumber.Uint64(), moved.BlockNumber.Uint64(), "both in one block")
	require.Equal(t, uint(3), moved.Logs[0].Index, "the second transaction's logs moved behind the first's")
	b.mining(t)

	eventually(t, 60*time.Second, "six responses, all reincluded", func() bool {
		return b.count(t, `SELECT count(*) FROM rflow.reorg_runs WHERE status = 'reincluded'`) == 6
	})
	b.settled(t, payee, 21, 6)
	require.Equal(t, keys, runKeys(), "no run under a new key")
	require.Zero(t, b.count(t, `SELECT count(*) FROM rflow.reorg_runs WHERE status <> 'reincluded'`))
	var hash string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT block_hash FROM rflow.workflow_runs WHERE trigger_key = $1`,
		chain.EventKey(anviltest.ChainID, c.TxHash, 2, chain.PhaseConfirmed, false)).Scan(&hash))
	require.Equal(t, moved.BlockHash.Hex(), hash, "the run follows its log to the new block")
	var payload struct {
		Event struct {
			LogIndex   uint `json:"log_index"`
			TxLogIndex uint `json:"tx_log_index"`
		} `json:"event"`
	}
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT trigger FROM rflow.workflow_runs WHERE trigger_key = $1`,
		chain.EventKey(anviltest.ChainID, c.TxHash, 2, chain.PhaseConfirmed, false)).Scan(&payload))
	require.Equal(t, uint(2), payload.Event.TxLogIndex, "the payload names the log's position in its transaction")
	require.Equal(t, uint(2), payload.Event.LogIndex, "and its block log index where it was claimed")
}

// TestLogReincludedAfterItsDecisionIsPaidOnce: a deposit transaction of
// three logs is claimed, and its runs stop at their delay; a reorg removes
// it, and with the fork 2 blocks deep the runs are decided orphaned and
// cancelled before they paid. Later its owner sends the same signed
// transaction again and it is mined: the same occurrences, so no new runs;
// the stopped runs go on (same run ids at the same attempt, their steps at
// their own attempts, so the sends' external ids are rflow:{run}:pay:1)
// and the payee gets exactly the 6 wei owed, once.
func TestLogReincludedAfterItsDecisionIsPaidOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, payee := payBundle(t, "3s")
	d := b.em.EmitMany(3, 1)
	raw := b.node.RawTx(d.TxHash)
	b.node.Mine(2)
	eventually(t, 20*time.Second, "three runs held at their delay", func() bool {
		return b.count(t, `SELECT count(*) FROM rflow.step_runs WHERE step_key = 'wait' AND status = 'waiting'`) == 3
	})
	b.atTip(t)
	b.node.Reorg(int(b.node.BlockNumber() - d.BlockNumber.Uint64() + 1))
	b.mining(t)
	eventually(t, 60*time.Second, "three runs decided orphaned and stopped", func() bool {
		return b.count(t, `SELECT count(*) FROM rflow.workflow_runs r JOIN rflow.reorg_runs rr ON rr.run_id = r.id
			WHERE r.status = 'cancelled' AND rr.status = 'completed'`) == 3
	})
	require.Zero(t, b.balance(t, payee), "nothing paid for a deposit that is gone")
	require.Zero(t, b.count(t, `SELECT count(*) FROM relayer.transactions`))

	// The deposit comes back, well past the decision.
	b.node.Call(nil, "eth_sendRawTransaction", hexutil.Bytes(raw))
	eventually(t, 20*time.Second, "the deposit mined again", func() bool {
		r, err := b.node.Client().TransactionReceipt(ctx, d.TxHash)
		return err == nil && r.BlockNumber.Cmp(new(big.Int).Add(d.BlockNumber, big.NewInt(2))) > 0
	})
	b.settled(t, payee, 6, 3)
	rows, err := b.pool.Query(ctx, `SELECT r.id, r.attempt, t.external_id, rr.reincluded_at IS NOT NULL
		FROM rflow.workflow_runs r JOIN relayer.transactions t ON t.external_id LIKE 'rflow:' || r.id || ':%'
		JOIN rflow.reorg_runs rr ON rr.run_id = r.id`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var id string
		var attempt int
		var ext string
		var recorded bool
		require.NoError(t, rows.Scan(&id, &attempt, &ext, &recorded))
		require.Equal(t, 1, attempt, "the same run at the same attempt: the same idempotency keys")
		require.Equal(t, "rflow:"+id+":pay:1", ext, "the send at its own attempt")
		require.True(t, recorded, "the decided response records the re-inclusion")
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, n)
	list, err := store.ListRuns(ctx, b.pool, store.RunFilter{})
	require.NoError(t, err)
	require.Len(t, list, 3)
	for _, r := range list {
		rs, err := store.RunResponses(ctx, b.pool, r.ID)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.Equal(t, store.RunCompleted, rs[0].Status, "the response decided before stays as it ran")
		require.NotNil(t, rs[0].ReincludedAt)
	}
}
