package anviltest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
)

func TestStartMineReorg(t *testing.T) {
	t.Parallel()
	n := anviltest.Start(t, anviltest.Options{})
	n.Mine(5)
	require.Equal(t, uint64(5), n.BlockNumber())
	n.Reorg(2)
	require.Equal(t, uint64(5), n.BlockNumber(), "anvil_reorg keeps the height")
	n.Restart()
	require.Equal(t, uint64(0), n.BlockNumber())
}

func TestDeployEmitter(t *testing.T) {
	t.Parallel()
	n := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, n)
	r := e.EmitMany(300, 1)
	require.Len(t, r.Logs, 300)
	require.Equal(t, e.Address, r.Logs[0].Address)
	require.Equal(t, e.ABI.Events["Deposit"].ID, r.Logs[0].Topics[0])
}
