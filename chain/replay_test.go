package chain_test

import (
	"context"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestReplayReadsInBoundedRanges: a replay of a span holding far more logs
// than one range may hold reads it in adaptive ranges that each stay
// within the log target (so memory is one range's, whatever the span),
// claims every log once, and a second replay of the span claims nothing
// new (the claim gate).
func TestReplayReadsInBoundedRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "history")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	first := node.BlockNumber() + 1
	for i := int64(0); i < 100; i++ { // 100 blocks of 10 logs
		e.EmitMany(10, i*10)
	}
	last := node.BlockNumber()
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	svc, err := chain.NewService(ctx, pool, gateClaimer{}, chain.Config{Networks: []chain.Network{network(node.URL)},
		Events: []chain.EventTrigger{{Workflow: "history", Network: "local", Event: deposit, Addresses: []common.Address{e.Address}}}},
		testLogger(t))
	require.NoError(t, err)
	defer svc.Close()

	const maxLogs = 100
	var calls int
	p, err := svc.Replay(ctx, int64(first), int64(last), chain.ReplayOptions{MaxLogs: maxLogs, Progress: func(chain.ReplayProgress) { calls++ }})
	require.NoError(t, err)
	require.EqualValues(t, 1000, p.Logs)
	require.EqualValues(t, 1000, p.Runs)
	require.EqualValues(t, last-first+1, p.Blocks)
	require.LessOrEqual(t, p.MaxRangeLogs, maxLogs, "no range holds more than the target")
	require.Greater(t, p.Ranges, int64(10), "the span is read in many ranges")
	require.EqualValues(t, p.Ranges, calls)
	require.Equal(t, 1000, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'history'`))

	again, err := svc.Replay(ctx, int64(first), int64(last), chain.ReplayOptions{MaxLogs: maxLogs})
	require.NoError(t, err)
	require.Zero(t, again.Runs, "the claim gate: a replayed span claims no occurrence twice")

	_, err = svc.Replay(ctx, 5, 4, chain.ReplayOptions{})
	require.ErrorContains(t, err, "want 0 <= from <= to")
}
