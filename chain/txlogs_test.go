package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
)

// noBlockReceipts forwards JSON-RPC to url, except eth_getBlockReceipts,
// which it answers the way a node without the method does (-32601). It
// counts the refused calls.
func noBlockReceipts(t *testing.T, url string) (*httptest.Server, *atomic.Int64) {
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var calls []struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) && json.Unmarshal(body, &calls) == nil &&
			len(calls) > 0 && calls[0].Method == "eth_getBlockReceipts" {
			out := make([]map[string]any, len(calls))
			for i, c := range calls {
				refused.Add(1)
				out[i] = map[string]any{"jsonrpc": "2.0", "id": c.ID,
					"error": map[string]any{"code": -32601, "message": "the method eth_getBlockReceipts does not exist/is not available"}}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv, &refused
}

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
	proxy, refused := noBlockReceipts(t, node.URL)
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
	require.Equal(t, int64(1), refused.Load(), "one refused block, then transaction receipts")
	_, err = limited.TxLogIndexes(ctx, logs)
	require.NoError(t, err)
	require.Equal(t, int64(1), refused.Load(), "the refusal is remembered")

	// A log read before a reorg moved its transaction: its receipt is of
	// another block, and the read is stale.
	moved := logs[len(logs)-1]
	moved.BlockHash = common.HexToHash("0x01")
	_, err = direct.TxLogIndexes(ctx, []types.Log{moved})
	require.ErrorContains(t, err, "another block")
}
