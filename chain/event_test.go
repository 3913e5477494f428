package chain_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestEventTriggerPhasesAndWhere(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "both", "even", "head-only")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	for i := int64(0); i < 4; i++ {
		e.EmitMany(300, i*300)
	}
	e.Transact("claim", big.NewInt(5)) // another event: never claimed
	net := network(node.URL)
	net.MaxBlockRange = 2
	addr := []common.Address{e.Address}
	runService(t, pool, chain.Config{Networks: []chain.Network{net}, Events: []chain.EventTrigger{
		{Workflow: "both", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnBoth},
		{Workflow: "even", Network: "local", Event: deposit, Addresses: addr, Where: func(ev map[string]any) (bool, error) {
			return ev["amount"].(*big.Int).Bit(0) == 0, nil
		}},
		{Workflow: "head-only", Network: "local", Event: deposit, RunOn: chain.RunOnHead},
	}})

	runs := func(wf, suffix string) int {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1 AND trigger_key LIKE '%'||$2`, wf, suffix)
	}
	eventually(t, 30*time.Second, "head-phase runs", func() bool { return runs("both", ":head") == 1200 })
	require.Less(t, runs("both", ":confirmed"), 1200, "the last logs are not 3 blocks deep yet")
	// head-only is its own ingestion task: it may trail the other one.
	eventually(t, 30*time.Second, "head-only runs", func() bool { return runs("head-only", "") == 1200 })
	node.Mine(3)
	eventually(t, 30*time.Second, "confirmed runs", func() bool { return runs("both", ":confirmed") == 1200 })
	eventually(t, 30*time.Second, "filtered runs", func() bool { return runs("even", "") == 600 })
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'even'
		AND (trigger->'event'->>'amount')::numeric % 2 = 1`))

	// Keys and chain coordinates.
	var key, hash string
	var block int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT trigger_key, block_number, block_hash FROM rflow.workflow_runs
		WHERE workflow_name = 'head-only' ORDER BY (trigger->'event'->>'amount')::numeric LIMIT 1`).Scan(&key, &block, &hash))
	require.Regexp(t, `^31337:0x[0-9a-f]{64}:tx0$`, key)
	require.Equal(t, int64(2), block, "deploy is block 1, the first emitMany block 2")
	require.Len(t, hash, 66)
}

// A log orphaned by a reorg of depth 1–5 gets a head-phase run (marked
// orphaned, OnReorg told) and never a confirmed-phase run.
func TestReorgOrphansHeadRunNeverConfirmed(t *testing.T) {
	t.Parallel()
	for depth := 1; depth <= 5; depth++ {
		t.Run(fmt.Sprintf("depth%d", depth), func(t *testing.T) {
			t.Parallel()
			pool := storetest.Pool(t)
			addWorkflows(t, pool, "wf")
			node := anviltest.Start(t, anviltest.Options{})
			e := anviltest.DeployEmitter(t, node)
			deposit, err := chain.NewEvent(e.ABI, "Deposit")
			require.NoError(t, err)
			kept := e.Deposit(1) // stays canonical
			node.Mine(depth)
			net := network(node.URL)
			net.Confirmations = depth + 2
			hooked := make(chan chain.Reorg, 4)
			runService(t, pool, chain.Config{Networks: []chain.Network{net},
				Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnBoth}},
				OnReorg: func(ctx context.Context, tx pgx.Tx, r chain.Reorg) error {
					var n int // the hook runs inside the reorg's transaction: it sees the marks
					if err := tx.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE orphaned_at IS NOT NULL`).Scan(&n); err != nil {
						return err
					}
					if n != len(r.OrphanedRuns) {
						return fmt.Errorf("hook sees %d orphaned runs, reorg reports %d", n, len(r.OrphanedRuns))
					}
					var highest int64 // …and the rewound cursors
					if err := tx.QueryRow(ctx, `SELECT max(block) FROM indexer.cursors`).Scan(&highest); err != nil {
						return err
					}
					if highest >= r.ForkBlock {
						return fmt.Errorf("cursor at %d not rewound below fork %d", highest, r.ForkBlock)
					}
					hooked <- r
					return nil
				}})

			orphan := e.Deposit(2)
			if depth > 1 {
				node.Mine(depth - 1) // the orphaned log sits depth blocks below the head
			}
			orphanKey := chain.EventKey(anviltest.ChainID, orphan.TxHash, 0, chain.PhaseHead, true)
			runKey := func(key string) int {
				return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key = $1`, key)
			}
			eventually(t, 20*time.Second, "the head-phase run", func() bool { return runKey(orphanKey) == 1 })
			before := node.BlockNumber()
			eventually(t, 10*time.Second, "the window at the tip", func() bool {
				return count(t, pool, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, before) == 1
			})
			node.Reorg(depth)
			require.Equal(t, before, node.BlockNumber())

			var r chain.Reorg
			select {
			case r = <-hooked:
			case <-time.After(20 * time.Second):
				t.Fatal("no reorg detected")
			}
			require.Equal(t, orphan.BlockNumber.Int64(), r.ForkBlock)
			require.Equal(t, depth, r.Depth)
			require.Len(t, r.OrphanedRuns, 1)
			// The hook ran before the reorg's commit; wait for it.
			eventually(t, 10*time.Second, "the reorg committed", func() bool {
				return count(t, pool, `SELECT count(*) FROM indexer.reorgs`) > 0
			})
			var orphanedKey string
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT trigger_key FROM rflow.workflow_runs WHERE id = $1 AND orphaned_at IS NOT NULL`,
				r.OrphanedRuns[0]).Scan(&orphanedKey))
			require.Equal(t, orphanKey, orphanedKey)
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM indexer.reorgs WHERE fork_block = $1 AND depth = $2`, r.ForkBlock, depth))

			// Bury the fork far below the confirmation depth: the kept log is
			// confirmed, the orphaned one never is.
			node.Mine(net.Confirmations + 3)
			keptConfirmed := chain.EventKey(anviltest.ChainID, kept.TxHash, 0, chain.PhaseConfirmed, true)
			eventually(t, 20*time.Second, "the kept log confirmed", func() bool { return runKey(keptConfirmed) == 1 })
			tip := int64(node.BlockNumber())
			eventually(t, 20*time.Second, "the confirmed cursor past the fork", func() bool {
				return count(t, pool, `SELECT count(*) FROM indexer.cursors WHERE phase = 'confirmed' AND block = $1`,
					tip-int64(net.Confirmations)) == 1
			})
			require.Equal(t, 0, runKey(chain.EventKey(anviltest.ChainID, orphan.TxHash, 0, chain.PhaseConfirmed, true)))
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE orphaned_at IS NOT NULL`))
		})
	}
}
