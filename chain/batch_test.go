package chain_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/store/storetest"
)

// rflow is down while the chain moves 200 blocks; it comes back behind a
// node that refuses batches over 10 calls in geth's way
// (--rpc.batch-request-limit) and also caps eth_getLogs at 5 blocks in
// Alchemy's words. The head tracker catches up in batches the node takes
// (before, it sent the same batch of 128 forever), and the event trigger
// claims every log of the downtime exactly once.
func TestCatchUpThroughBatchAndRangeCappedNode(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	proxy := rpcproxy.Start(t, node.URL)
	cfg := chain.Config{Networks: []chain.Network{network(proxy.URL)}, LeaseTTL: 3 * time.Second,
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}}

	ctx, cancel := context.WithCancel(context.Background())
	svc, err := chain.NewService(ctx, pool, gateClaimer{}, cfg, testLogger(t))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	e.EmitMany(3, 0)
	eventually(t, 30*time.Second, "the first logs", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 3
	})
	cancel()
	require.NoError(t, <-done)
	svc.Close()

	for i := int64(1); i <= 4; i++ {
		node.Mine(50)
		e.EmitMany(5, i*100)
	}
	proxy.Set(rpcproxy.Faults{BatchLimit: 10, BatchStyle: rpcproxy.BatchTooLarge, RangeLimit: 5,
		RangeStyle: rpcproxy.AlchemyRange})
	runService(t, pool, cfg)
	head := int64(node.BlockNumber())
	eventually(t, 60*time.Second, "the window at the node's head", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, head) == 1
	})
	eventually(t, 60*time.Second, "every log of the downtime", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 23
	})
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 23, count(t, pool, `SELECT count(DISTINCT trigger_key) FROM rflow.workflow_runs`), "each once")
	require.Positive(t, proxy.Refused(rpcproxy.RefusedBatch), "the node did refuse batches")
	require.Positive(t, proxy.Refused(rpcproxy.RefusedRange), "and ranges")
	refused := proxy.Refused(rpcproxy.RefusedBatch)
	node.Mine(40)
	head = int64(node.BlockNumber())
	eventually(t, 60*time.Second, "the window at the new head", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, head) == 1
	})
	require.Equal(t, refused, proxy.Refused(rpcproxy.RefusedBatch), "the size that worked is kept")
}
