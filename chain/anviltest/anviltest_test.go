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
