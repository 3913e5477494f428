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

// A provider answering 429 with Retry-After: 1 is called again only after
// that second, not at the client's own backoff (100 ms), and the pause
// holds for the next call too.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	proxy := rpcproxy.Start(t, node.URL)
	c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{proxy.URL}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	proxy.Set(rpcproxy.Faults{Throttle: 1, RetryAfter: time.Second})
	start := time.Now()
	id, err := c.ChainID(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, anviltest.ChainID, id)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "waited for the Retry-After")
	require.Equal(t, 2, proxy.Calls("eth_chainId"), "called once more, after the pause")

	// A call that gives up on the 429 leaves the pause to the next one.
	once, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{proxy.URL}, Attempts: 1,
		Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(once.Close)
	proxy.Set(rpcproxy.Faults{Throttle: 1, RetryAfter: time.Second})
	_, err = once.ChainID(context.Background())
	require.ErrorContains(t, err, "429")
	start = time.Now()
	_, err = once.Head(context.Background())
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the next call waits out the same pause")
}

// rflow follows a chain through a provider with every fault a hosted
// endpoint shows in a bad hour: a load balancer whose every third answer
// comes from a node 3 blocks behind, dropped connections (before and after
// the node saw the call), 429s, and log ranges capped at 4 blocks in
// QuickNode's words. No reorg is recorded (a lagging answer is not a fork),
// the window reaches the head, and every log is claimed exactly once.
func TestFaultyLoadBalancedProvider(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	proxy := rpcproxy.Start(t, node.URL)
	proxy.Set(rpcproxy.Faults{Lag: 3, LagEvery: 3, RangeLimit: 4, RangeStyle: rpcproxy.QuickNodeRange})
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	runService(t, pool, chain.Config{Networks: []chain.Network{network(proxy.URL)},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	for i := int64(0); i < 10; i++ {
		e.EmitMany(2, i*10)
		node.Mine(2)
		proxy.Update(func(f *rpcproxy.Faults) {
			switch i % 3 {
			case 0:
				f.Drop = 2
			case 1:
				f.DropAfter = 2
			case 2:
				f.Throttle, f.RetryAfter = 2, 100*time.Millisecond
			}
		})
		time.Sleep(100 * time.Millisecond)
	}
	head := int64(node.BlockNumber())
	eventually(t, 60*time.Second, "the window at the head", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, head) == 1
	})
	eventually(t, 60*time.Second, "every log", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 20
	})
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 20, count(t, pool, `SELECT count(DISTINCT trigger_key) FROM rflow.workflow_runs`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM indexer.reorgs`), "a lagging answer is no reorg")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE orphaned_at IS NOT NULL`))
	for _, r := range []rpcproxy.Refusal{rpcproxy.RefusedLag, rpcproxy.RefusedDropped, rpcproxy.RefusedThrottle,
		rpcproxy.RefusedRange} {
		require.Positive(t, proxy.Refused(r), r)
	}
}

// Two event triggers and a replay read one network through a provider
// that caps ranges at 7 blocks in QuickNode's words. The limit is learned
// from the first refusals and held by every reader: ranges do not grow past
// it and get refused again (before, each reader halved, grew back by
// doubling and was refused again every few ranges).
func TestProviderLimitLearnedOnce(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "a", "b")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	for i := int64(0); i < 6; i++ {
		e.EmitMany(2, i*10)
		node.Mine(25)
	}
	proxy := rpcproxy.Start(t, node.URL)
	proxy.Set(rpcproxy.Faults{RangeLimit: 7, RangeStyle: rpcproxy.QuickNodeRange})
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	svc := runService(t, pool, chain.Config{Networks: []chain.Network{network(proxy.URL)},
		Events: []chain.EventTrigger{{Workflow: "a", Network: "local", Event: deposit, RunOn: chain.RunOnHead},
			{Workflow: "b", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	eventually(t, 60*time.Second, "every log, twice", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 24
	})
	p, err := svc.Replay(context.Background(), 0, int64(node.BlockNumber()), chain.ReplayOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 0, p.Runs, "a replay of claimed logs claims nothing new")
	require.EqualValues(t, 24, p.Logs)
	require.LessOrEqual(t, proxy.Refused(rpcproxy.RefusedRange), 3,
		"refused once per reader at most, until the limit was known")
}

// Behind a load balancer, every other answer comes from a node 3 blocks
// behind that answers eth_getLogs past its head with the logs it has
// (none of the newer blocks') instead of refusing. A range read from it
// must not pass for a range without logs: rflow asks for the range's last
// block in the same request and reads the range again when the node does
// not have it. Every log is claimed exactly once.
func TestLoadBalancerHidingNewestLogs(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	proxy := rpcproxy.Start(t, node.URL)
	proxy.Set(rpcproxy.Faults{Lag: 3, LagEvery: 2, LagHidesLogs: true})
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	runService(t, pool, chain.Config{Networks: []chain.Network{network(proxy.URL)},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	eventually(t, 30*time.Second, "the window", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks`) > 0
	})
	for i := int64(0); i < 10; i++ {
		e.EmitMany(2, i*10)
		time.Sleep(150 * time.Millisecond)
	}
	node.Mine(5)
	eventually(t, 60*time.Second, "every log", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 20
	})
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 20, count(t, pool, `SELECT count(DISTINCT trigger_key) FROM rflow.workflow_runs`))
	require.Positive(t, proxy.Refused(rpcproxy.RefusedLag))
}
