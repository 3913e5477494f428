package chain_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// anvil 1.7.1 answers the finality tags as head-32 (safe) and head-64
// (finalized), 0 before that: a run_on: finalized trigger claims a log
// exactly when the node's finalized block reaches the log's block, and
// run_on: safe when its safe block does, not at a depth of confirmations.
func TestFinalityPhasesFollowTheNodesTags(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "final", "safe", "head")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	rcpt := e.Deposit(7)
	logBlock := rcpt.BlockNumber.Uint64()
	addr := []common.Address{e.Address}
	runService(t, pool, chain.Config{Networks: []chain.Network{network(node.URL)}, Events: []chain.EventTrigger{
		{Workflow: "final", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnFinalized},
		{Workflow: "safe", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnSafe},
		{Workflow: "head", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnHead},
	}})
	runs := func(wf string) int {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, wf)
	}
	tagged := func(tag string) uint64 {
		var b struct {
			Number hexutil.Uint64 `json:"number"`
		}
		node.Call(&b, "eth_getBlockByNumber", tag, false)
		return uint64(b.Number)
	}
	eventually(t, 30*time.Second, "head run", func() bool { return runs("head") == 1 })

	// One block short of safe: 31 blocks on top is far past the network's
	// 3 confirmations, and still no tagged run.
	node.Mine(int(logBlock + 31 - node.BlockNumber()))
	require.Equal(t, logBlock-1, tagged("safe"))
	eventually(t, 10*time.Second, "the tags of the new head recorded", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.finality WHERE chain_id = $1 AND tag = 'safe' AND number = $2`,
			anviltest.ChainID, logBlock-1) == 1
	})
	time.Sleep(500 * time.Millisecond)
	require.Zero(t, runs("safe"), "the safe block is one short of the log")
	node.Mine(1)
	eventually(t, 30*time.Second, "safe run once the safe block reaches the log", func() bool { return runs("safe") == 1 })
	require.Zero(t, runs("final"))

	node.Mine(int(logBlock + 63 - node.BlockNumber()))
	require.Equal(t, logBlock-1, tagged("finalized"))
	eventually(t, 10*time.Second, "the finalized tag recorded", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.finality WHERE chain_id = $1 AND tag = 'finalized' AND number = $2`,
			anviltest.ChainID, logBlock-1) == 1
	})
	time.Sleep(500 * time.Millisecond)
	require.Zero(t, runs("final"), "the finalized block is one short of the log")
	node.Mine(1)
	eventually(t, 30*time.Second, "finalized run once the finalized block reaches the log", func() bool { return runs("final") == 1 })

	// The key is the phase-less key of run_on: confirmed (switching between
	// the two does not run a log again); the payload names the phase.
	var key, phase string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT trigger_key, trigger->>'phase' FROM rflow.workflow_runs
		WHERE workflow_name = 'final'`).Scan(&key, &phase))
	require.Equal(t, chain.EventKey(anviltest.ChainID, rcpt.TxHash, 0, chain.PhaseFinalized, false), key) // the deposit's only log
	require.NotContains(t, key, "finalized")
	require.Equal(t, "finalized", phase)

	// Lag and stall checks measure a tagged phase against its tag's block:
	// the finalized cursor, 64 blocks below the head, is not behind.
	eventually(t, 10*time.Second, "the finalized cursor at the finalized block", func() bool {
		lags, err := store.CursorLags(context.Background(), pool)
		require.NoError(t, err)
		for _, l := range lags {
			if l.Task == "event/final" && l.Phase == "finalized" {
				return l.Block == int64(logBlock) && l.Head == int64(logBlock) && l.Behind == 0 && l.Waiting == 0 &&
					!l.Stalled(time.Millisecond)
			}
		}
		return false
	})
}

// A node that answers the finality tags with null (a chain without them,
// or a node too old): rflow start's check names the network and what
// needs the tags, and a running service claims nothing for the tagged
// phase while the head phase on the same node goes on.
func TestNodeWithoutFinalityTags(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "final", "head")
	node := anviltest.Start(t, anviltest.Options{})
	proxy := anviltest.WithoutFinalityTags(t, node.URL)
	e := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	e.Deposit(7)
	node.Mine(80) // anvil itself would call the log finalized by now
	addr := []common.Address{e.Address}
	runService(t, pool, chain.Config{Networks: []chain.Network{network(proxy)}, Events: []chain.EventTrigger{
		{Workflow: "final", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnFinalized},
		{Workflow: "head", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnHead},
	}})
	err = chain.CheckFinality(context.Background(), []chain.Network{network(proxy)}, []chain.FinalityUse{{Network: "local", Tag: store.TagFinalized,
		What: "workflow final: trigger run_on: finalized"}}, testLogger(t))
	require.ErrorContains(t, err, `network local: the node answers eth_getBlockByNumber("finalized") with null: it serves no finality tags, `+
		"but workflows need it: workflow final: trigger run_on: finalized. Use confirmations: N")
	require.NotContains(t, err.Error(), `"safe"`, "only the tag something needs is asked for")
	require.NoError(t, chain.CheckFinality(context.Background(), []chain.Network{network(proxy)}, nil, testLogger(t)),
		"nothing needs the tags, nothing declared")

	runs := func(wf string) int {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, wf)
	}
	eventually(t, 30*time.Second, "head run", func() bool { return runs("head") == 1 })
	node.Mine(5)
	time.Sleep(time.Second)
	require.Zero(t, runs("final"), "no tag: the finalized phase never treats the head as final")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM indexer.finality WHERE chain_id = $1`, anviltest.ChainID))

	// A network that declares finality: tags is checked with nothing using
	// them: the declaration is wrong.
	declared := network(proxy)
	declared.Finality = chain.FinalityTags
	require.ErrorContains(t, chain.CheckFinality(context.Background(), []chain.Network{declared}, nil, testLogger(t)),
		`eth_getBlockByNumber("safe") with null: it serves no finality tags, but rflow.yaml declares finality: tags for the network`)

	// The same check against anvil itself, which serves the tags.
	require.NoError(t, chain.CheckFinality(context.Background(), []chain.Network{network(node.URL)}, []chain.FinalityUse{
		{Network: "local", Tag: store.TagSafe, What: "x"}, {Network: "local", Tag: store.TagFinalized, What: "y"}}, testLogger(t)))
}

// A finality violation on geth --dev (a block a second): debug_setHead
// below the finalized block drops the finalized log's block. The reorg
// detector runs for the finalized phase as for any: the run is orphaned
// (OnReorg told). The node's old tags are forgotten with the old chain, so
// the rewound finalized cursor does not read the new chain at the log's
// height until geth finalizes it there (the engine's decision on the
// orphan, re-included or not, waits on that cursor).
func TestFinalityViolationOnGeth(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "final")
	node := gethtest.Start(t, gethtest.Options{Period: time.Second})
	e := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	for node.BlockNumber()%32 > 20 {
		time.Sleep(time.Second)
	}
	rcpt := e.Deposit(7)
	logBlock := rcpt.BlockNumber.Uint64()
	net := chain.Network{Name: "dev", ChainID: gethtest.ChainID, RPC: []string{node.URL}, Confirmations: 1,
		BlockPollInterval: 50 * time.Millisecond, MaxBlockRange: 2000}
	orphaned := make(chan []uuid.UUID, 10)
	runService(t, pool, chain.Config{Networks: []chain.Network{net},
		Events: []chain.EventTrigger{{Workflow: "final", Network: "dev", Event: deposit, Addresses: []common.Address{e.Address},
			RunOn: chain.RunOnFinalized}},
		OnReorg: func(_ context.Context, _ pgx.Tx, r chain.Reorg) error { orphaned <- r.OrphanedRuns; return nil },
	})
	run := func() (id uuid.UUID, orphanedAt *time.Time) {
		err := pool.QueryRow(context.Background(), `SELECT id, orphaned_at FROM rflow.workflow_runs
			WHERE workflow_name = 'final'`).Scan(&id, &orphanedAt)
		if err != nil {
			return uuid.Nil, nil
		}
		return id, orphanedAt
	}
	finalized := func() uint64 {
		var b struct {
			Number hexutil.Uint64 `json:"number"`
		}
		node.Call(&b, "eth_getBlockByNumber", "finalized", false)
		return uint64(b.Number)
	}
	cursor := func() int64 {
		var b int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT block FROM indexer.cursors
			WHERE task = 'event/final' AND phase = 'finalized'`).Scan(&b))
		return b
	}
	eventually(t, 90*time.Second, "the finalized run", func() bool { id, _ := run(); return id != uuid.Nil })
	require.GreaterOrEqual(t, finalized(), logBlock)
	id, _ := run()

	raw := node.RawTx(rcpt.TxHash)
	node.SetHead(logBlock - 1) // below the finalized block: a finality violation
	select {
	case got := <-orphaned:
		require.Contains(t, got, id)
	case <-time.After(60 * time.Second):
		t.Fatal("no reorg reported after a rewind below the finalized block")
	}
	// The new chain grows a block a second from the fork, without the log
	// (period mode does not re-mine it) or with it (re-sent): either way
	// the finalized cursor must not pass the fork's height again before
	// geth finalizes the new chain there.
	_ = node.SendRaw(raw)
	newBlock := int64(logBlock)
	eventually(t, 10*time.Second, "the run orphaned (the reorg's transaction committed)", func() bool { _, at := run(); return at != nil })

	// Until geth finalizes the new chain at the log, the cursor stays
	// below it, however many blocks are mined on top.
	checked := 0
	for f := finalized(); f < uint64(newBlock); f = finalized() {
		require.Less(t, cursor(), newBlock, "the finalized cursor read a block geth has not finalized (node finalized %d)", f)
		checked++
		time.Sleep(200 * time.Millisecond)
	}
	require.Greater(t, checked, 5, "the new chain was finalized at once: nothing checked")
	eventually(t, 30*time.Second, "the finalized cursor past the re-mined log once geth finalizes it", func() bool {
		return cursor() >= newBlock
	})
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'final'`), "the same key: no second run")
}

// A block trigger with run_on: finalized fires for a block once the node
// finalizes it (anvil: head-64), each block once.
func TestBlockTriggerRunOnFinalized(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "final-blocks")
	node := anviltest.Start(t, anviltest.Options{})
	node.Mine(70)
	runService(t, pool, chain.Config{Networks: []chain.Network{network(node.URL)}, Blocks: []chain.BlockTrigger{
		{Workflow: "final-blocks", Network: "local", Every: 1, RunOn: chain.RunOnFinalized}}})
	eventually(t, 10*time.Second, "the block cursor", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.cursors WHERE task = 'block/final-blocks'`) == 1
	})
	start := node.BlockNumber() // a new block trigger starts at the head
	node.Mine(70)
	head := node.BlockNumber()
	eventually(t, 30*time.Second, "blocks up to the finalized one", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'final-blocks'`) == int(head-64-start)
	})
	time.Sleep(500 * time.Millisecond)
	var top int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT max(block_number) FROM rflow.workflow_runs
		WHERE workflow_name = 'final-blocks'`).Scan(&top))
	require.Equal(t, int64(head-64), top, "no block past the node's finalized block")
	node.Mine(1)
	eventually(t, 30*time.Second, "the next finalized block", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'final-blocks'`) == int(head-64-start)+1
	})
}
