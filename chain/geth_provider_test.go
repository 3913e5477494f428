package chain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// rflow starts against a geth that caps eth_getLogs at 5 blocks
// (--rpc.rangelimit), batches at 10 calls (--rpc.batch-request-limit) and
// batch replies at 4 KB (--rpc.batch-response-max-size), with 50 blocks of
// history and logs to catch up on. The head tracker fills its window in
// batches geth takes (before, the first batch of 50 was refused forever),
// and the event trigger claims every log exactly once in ranges geth takes.
func TestGethRangeAndBatchLimits(t *testing.T) {
	t.Parallel()
	node := gethtest.Start(t, gethtest.Options{RangeLimit: 5, BatchLimit: 10, BatchResponseMax: 4096})
	e := anviltest.DeployEmitter(t, node)
	for i := int64(0); i < 5; i++ {
		e.EmitMany(3, i*10)
		node.Mine(8)
	}
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	net := network(node.URL)
	net.ChainID = gethtest.ChainID
	runService(t, pool, chain.Config{Networks: []chain.Network{net},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	head := int64(node.BlockNumber())
	eventually(t, 60*time.Second, "the window at geth's head", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, head) == 1
	})
	eventually(t, 60*time.Second, "every log", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 15
	})
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 15, count(t, pool, `SELECT count(DISTINCT trigger_key) FROM rflow.workflow_runs`))
	require.Equal(t, head+1, int64(count(t, pool, `SELECT count(*) FROM indexer.blocks`)), "the whole window, block 0 on")
}
