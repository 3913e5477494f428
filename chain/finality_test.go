package chain_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
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
	require.Equal(t, chain.EventKey(anviltest.ChainID, rcpt.TxHash, rcpt.Logs[0].Index, chain.PhaseFinalized, false), key)
	require.NotContains(t, key, "finalized")
	require.Equal(t, "finalized", phase)
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
	svc := runService(t, pool, chain.Config{Networks: []chain.Network{network(proxy)}, Events: []chain.EventTrigger{
		{Workflow: "final", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnFinalized},
		{Workflow: "head", Network: "local", Event: deposit, Addresses: addr, RunOn: chain.RunOnHead},
	}})
	err = svc.CheckFinality(context.Background(), []chain.FinalityUse{{Network: "local", Tag: store.TagFinalized,
		What: "workflow final: trigger run_on: finalized"}})
	require.ErrorContains(t, err, `network local: the node answers eth_getBlockByNumber("finalized") with null: it serves no finality tags, `+
		"but workflows need it: workflow final: trigger run_on: finalized. Use confirmations: N")
	require.NotContains(t, err.Error(), `"safe"`, "only the tag something needs is asked for")
	require.NoError(t, svc.CheckFinality(context.Background(), nil), "nothing needs the tags, nothing declared")

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
	decl, err := chain.NewService(context.Background(), pool, gateClaimer{}, chain.Config{Networks: []chain.Network{declared}}, testLogger(t))
	require.NoError(t, err)
	defer decl.Close()
	require.ErrorContains(t, decl.CheckFinality(context.Background(), nil),
		`eth_getBlockByNumber("safe") with null: it serves no finality tags, but rflow.yaml declares finality: tags for the network`)

	// The same check against anvil itself, which serves the tags.
	direct, err := chain.NewService(context.Background(), pool, gateClaimer{}, chain.Config{Networks: []chain.Network{network(node.URL)}}, testLogger(t))
	require.NoError(t, err)
	defer direct.Close()
	require.NoError(t, direct.CheckFinality(context.Background(), []chain.FinalityUse{{Network: "local", Tag: store.TagSafe, What: "x"},
		{Network: "local", Tag: store.TagFinalized, What: "y"}}))
}
