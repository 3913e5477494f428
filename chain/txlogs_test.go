package chain_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
)

// TestTxLogIndexes: a log's position in its transaction is its block log
// index minus its transaction's first log's, read from receipts: a block
// whose matching logs come from many transactions by eth_getBlockReceipts,
// a block with few by eth_getTransactionReceipt, and a node without
// eth_getBlockReceipts by transaction receipts only (remembered after the
// first refusal).
func TestTxLogIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	node.SetAutomine(false)
	// Block 1: ten transactions of two logs (nine are not the block's
	// first: one eth_getBlockReceipts). Block 2: three of three logs.
	for i := int64(0); i < 10; i++ {
		em.Send("emitMany", big.NewInt(2), big.NewInt(10*i))
	}
	node.Mine(1)
	for i := int64(0); i < 3; i++ {
		em.Send("emitMany", big.NewInt(3), big.NewInt(100*i))
	}
	node.Mine(1)
	head := node.BlockNumber()

	direct, err := chain.Dial(ctx, chain.ClientOptions{URLs: []string{node.URL}})
	require.NoError(t, err)
	t.Cleanup(direct.Close)
	// A node without eth_getBlockReceipts.
	proxy := rpcproxy.Start(t, node.URL)
	proxy.Set(rpcproxy.Faults{Refuse: map[string]string{
		"eth_getBlockReceipts": "the method eth_getBlockReceipts does not exist/is not available"}})
	limited, err := chain.Dial(ctx, chain.ClientOptions{URLs: []string{proxy.URL}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(limited.Close)

	q := chain.LogQuery{From: head - 1, To: head, Addresses: []common.Address{em.Address}}
	logs, err := direct.Logs(ctx, q)
	require.NoError(t, err)
	require.Len(t, logs, 29)
	want := make([]uint, len(logs))
	for i, l := range logs {
		want[i] = node.TxLogIndex(l)
	}
	require.Equal(t, []uint{2, 0, 1, 2}, want[len(want)-4:], "positions restart in each transaction")

	for name, c := range map[string]*chain.Client{"direct": direct, "no eth_getBlockReceipts": limited} {
		got, err := c.TxLogIndexes(ctx, logs)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
	require.Equal(t, 1, proxy.Refused(rpcproxy.RefusedMethod), "one refused block, then transaction receipts")
	_, err = limited.TxLogIndexes(ctx, logs)
	require.NoError(t, err)
	require.Equal(t, 1, proxy.Refused(rpcproxy.RefusedMethod), "the refusal is remembered")

	// A log read before a reorg moved its transaction: its receipt is of
	// another block, and the read is stale.
	moved := logs[len(logs)-1]
	moved.BlockHash = common.HexToHash("0x01")
	_, err = direct.TxLogIndexes(ctx, []types.Log{moved})
	require.ErrorContains(t, err, "another block")
}
