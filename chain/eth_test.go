package chain_test

import (
	"context"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
)

// Eth fails over past a broken URL, and hands the node's answers back as
// ethclient does, asked once: a missing receipt is ethereum.NotFound, a
// revert keeps its data.
func TestEthFailsOverAndKeepsAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	var broken atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		broken.Add(1)
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	t.Cleanup(bad.Close)
	proxy := rpcproxy.Start(t, node.URL)
	c, err := chain.Dial(ctx, chain.ClientOptions{URLs: []string{bad.URL, proxy.URL}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	eth := c.Eth()

	n, err := eth.BlockNumber(ctx)
	require.NoError(t, err)
	require.Equal(t, node.BlockNumber(), n)
	require.Positive(t, broken.Load(), "the broken URL was tried first")

	_, err = eth.TransactionReceipt(ctx, common.HexToHash("0x01"))
	require.ErrorIs(t, err, ethereum.NotFound)
	require.Equal(t, 1, proxy.Calls("eth_getTransactionReceipt"), "no such receipt is an answer, not retried")

	data, err := em.ABI.Pack("refund", common.HexToAddress("0xdEaD"), big.NewInt(5000))
	require.NoError(t, err)
	_, err = eth.EstimateGas(ctx, ethereum.CallMsg{To: &em.Address, Data: data})
	var de rpc.DataError
	require.True(t, errors.As(err, &de), "revert data kept: %v", err)
	require.Contains(t, err.Error(), "execution reverted")
	require.NotContains(t, err.Error(), proxy.URL, "an answer names no URL")
	require.Equal(t, 1, proxy.Calls("eth_estimateGas"))
}

// BlockHash is the node's own hash of a block (what the relayer checks a
// receipt's block against), and ethereum.NotFound past the head.
func TestEthBlockHashIsTheNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	node.Mine(2)
	c, err := chain.Dial(ctx, chain.ClientOptions{URLs: []string{node.URL}})
	require.NoError(t, err)
	defer c.Close()
	var blk struct {
		Hash common.Hash `json:"hash"`
	}
	node.Call(&blk, "eth_getBlockByNumber", "0x2", false)
	got, err := c.Eth().BlockHash(ctx, big.NewInt(2))
	require.NoError(t, err)
	require.Equal(t, blk.Hash, got)
	_, err = c.Eth().BlockHash(ctx, big.NewInt(99))
	require.ErrorIs(t, err, ethereum.NotFound)
}

// A batch fails over past a broken URL like a single call, and each
// element keeps its own answer: a result, or the node's error.
func TestEthBatchFailsOverAndKeepsEachAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	node.Mine(3)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	t.Cleanup(bad.Close)
	c, err := chain.Dial(ctx, chain.ClientOptions{URLs: []string{bad.URL, node.URL}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var head hexutil.Uint64
	var receipt *struct{}
	batch := []rpc.BatchElem{
		{Method: "eth_blockNumber", Result: &head},
		{Method: "eth_getTransactionReceipt", Args: []any{common.HexToHash("0x01")}, Result: &receipt},
		{Method: "eth_sendRawTransaction", Args: []any{"0x00"}, Result: new(common.Hash)},
	}
	require.NoError(t, c.Eth().BatchCallContext(ctx, batch))
	require.NoError(t, batch[0].Error)
	require.Equal(t, node.BlockNumber(), uint64(head))
	require.NoError(t, batch[1].Error)
	require.Nil(t, receipt, "no such receipt is null, not an error")
	require.Error(t, batch[2].Error, "the node refuses bytes that are no transaction")
}
