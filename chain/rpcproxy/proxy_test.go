package rpcproxy_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
)

type testBundle struct {
	node  *anviltest.Node
	proxy *rpcproxy.Proxy
	rpc   *rpc.Client
}

func setup(t *testing.T) testBundle {
	t.Helper()
	node := anviltest.Start(t, anviltest.Options{})
	p := rpcproxy.Start(t, node.URL)
	c, err := rpc.Dial(p.URL)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return testBundle{node: node, proxy: p, rpc: c}
}

func logs(c *rpc.Client, from, to uint64) error {
	var out []any
	return c.CallContext(context.Background(), &out, "eth_getLogs",
		map[string]any{"fromBlock": hexutil.EncodeUint64(from), "toBlock": hexutil.EncodeUint64(to)})
}

func TestRangeLimitSpeaksEachProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.node.Mine(20)
	for style, want := range map[rpcproxy.RangeStyle]string{
		rpcproxy.GethRange:      "exceed maximum block range 4",
		rpcproxy.AlchemyRange:   "this block range should work: [0x3, 0x7]",
		rpcproxy.QuickNodeRange: "eth_getLogs is limited to a 5 range",
	} {
		b.proxy.Set(rpcproxy.Faults{RangeLimit: 5, RangeStyle: style})
		require.ErrorContains(t, logs(b.rpc, 3, 8), want)
		require.NoError(t, logs(b.rpc, 3, 7), "5 blocks pass")
	}
	b.proxy.Set(rpcproxy.Faults{RangeLimit: 12000, RangeStyle: rpcproxy.QuickNodeRange})
	require.ErrorContains(t, logs(b.rpc, 0, 12000), "limited to a 12,000 range")
	require.Equal(t, 4, b.proxy.Refused(rpcproxy.RefusedRange))
	require.Equal(t, 7, b.proxy.Calls("eth_getLogs"))
}

func TestResultLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := anviltest.DeployEmitter(t, b.node)
	e.EmitMany(11, 0)
	head := b.node.Client()
	n, err := head.BlockNumber(context.Background())
	require.NoError(t, err)
	b.proxy.Set(rpcproxy.Faults{ResultLimit: 10})
	require.ErrorContains(t, logs(b.rpc, 0, n), "query returned more than 10 results")
	b.proxy.Set(rpcproxy.Faults{ResultLimit: 11})
	require.NoError(t, logs(b.rpc, 0, n))
	require.Equal(t, 1, b.proxy.Refused(rpcproxy.RefusedResults))
}

func blockBatch(n int) ([]rpc.BatchElem, []*struct{ Number hexutil.Uint64 }) {
	elems := make([]rpc.BatchElem, n)
	out := make([]*struct{ Number hexutil.Uint64 }, n)
	for i := range elems {
		elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.EncodeUint64(uint64(i)), false}, Result: &out[i]}
	}
	return elems, out
}

func TestBatchLimitStyles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.node.Mine(10)
	ctx := context.Background()

	b.proxy.Set(rpcproxy.Faults{BatchLimit: 3, BatchStyle: rpcproxy.BatchTooLarge})
	elems, _ := blockBatch(4)
	require.NoError(t, b.rpc.BatchCallContext(ctx, elems), "geth answers the batch with one error")
	require.ErrorContains(t, elems[0].Error, "batch too large")
	for _, e := range elems[1:] {
		require.ErrorIs(t, e.Error, rpc.ErrMissingBatchResponse)
	}

	b.proxy.Set(rpcproxy.Faults{BatchLimit: 3, BatchStyle: rpcproxy.BatchWhole})
	elems, _ = blockBatch(4)
	require.Error(t, b.rpc.BatchCallContext(ctx, elems), "one error object is no batch reply")

	b.proxy.Set(rpcproxy.Faults{BatchLimit: 3, BatchStyle: rpcproxy.BatchTruncate})
	elems, got := blockBatch(5)
	require.NoError(t, b.rpc.BatchCallContext(ctx, elems))
	for i, e := range elems {
		if i < 3 {
			require.NoError(t, e.Error)
			require.Equal(t, hexutil.Uint64(i), got[i].Number)
		} else {
			require.ErrorIs(t, e.Error, rpc.ErrMissingBatchResponse)
		}
	}
	require.Equal(t, 2, b.proxy.Refused(rpcproxy.RefusedTruncated))

	elems, _ = blockBatch(3)
	require.NoError(t, b.rpc.BatchCallContext(ctx, elems))
	for _, e := range elems {
		require.NoError(t, e.Error, "a batch at the limit passes")
	}
	require.Equal(t, []int{4, 4, 5, 3}, b.proxy.Batches())
	require.Equal(t, 16, b.proxy.Calls("eth_getBlockByNumber"))
	require.Equal(t, 6, b.proxy.Relayed("eth_getBlockByNumber"), "the truncated batch's first 3 and the last batch")
	require.Equal(t, 3, b.proxy.Refused(rpcproxy.RefusedBatch))
}

func TestThrottleSaysRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.proxy.Set(rpcproxy.Faults{Throttle: 2, RetryAfter: 1500 * time.Millisecond})
	resp, err := http.Post(b.proxy.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	var id hexutil.Uint64
	err = b.rpc.CallContext(context.Background(), &id, "eth_chainId")
	var herr rpc.HTTPError
	require.True(t, errors.As(err, &herr), "%v", err)
	require.Equal(t, http.StatusTooManyRequests, herr.StatusCode)
	require.NoError(t, b.rpc.CallContext(context.Background(), &id, "eth_chainId"), "the third request passes")
	require.Equal(t, 2, b.proxy.Refused(rpcproxy.RefusedThrottle))
	require.Equal(t, 3, b.proxy.Calls("eth_chainId"))
}

func TestLagAnswersAsAnOlderNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := anviltest.DeployEmitter(t, b.node)
	rc := e.Deposit(1) // the newest block
	b.node.Mine(2)
	real, err := b.node.Client().BlockNumber(context.Background())
	require.NoError(t, err)
	ctx := context.Background()

	b.proxy.Set(rpcproxy.Faults{Lag: 3})
	var n hexutil.Uint64
	require.NoError(t, b.rpc.CallContext(ctx, &n, "eth_blockNumber"))
	require.Equal(t, real-3, uint64(n))
	var blk *struct{ Number hexutil.Uint64 }
	require.NoError(t, b.rpc.CallContext(ctx, &blk, "eth_getBlockByNumber", "latest", false))
	require.Equal(t, real-3, uint64(blk.Number))
	require.NoError(t, b.rpc.CallContext(ctx, &blk, "eth_getBlockByNumber", hexutil.EncodeUint64(real), false))
	require.Nil(t, blk, "a block past the lagging head is unknown")
	var receipt map[string]any
	require.NoError(t, b.rpc.CallContext(ctx, &receipt, "eth_getTransactionReceipt", rc.TxHash))
	require.Nil(t, receipt, "a receipt past the lagging head is unknown")
	require.ErrorContains(t, logs(b.rpc, 0, real), "block range extends beyond current head block")
	require.NoError(t, logs(b.rpc, 0, real-3))

	b.proxy.Set(rpcproxy.Faults{Lag: 3, LagHidesLogs: true})
	var found []map[string]any
	require.NoError(t, b.rpc.CallContext(ctx, &found, "eth_getLogs",
		map[string]any{"fromBlock": "0x0", "toBlock": hexutil.EncodeUint64(real)}))
	require.Empty(t, found, "the deposit's log, 3 blocks deep, is hidden")
	b.proxy.Set(rpcproxy.Faults{})
	require.NoError(t, b.rpc.CallContext(ctx, &found, "eth_getLogs",
		map[string]any{"fromBlock": "0x0", "toBlock": hexutil.EncodeUint64(real)}))
	require.Len(t, found, 1)

	b.proxy.Set(rpcproxy.Faults{Lag: 3, LagEvery: 2}) // a load balancer over a fresh node and a lagging one
	seen := map[uint64]bool{}
	for range 4 {
		require.NoError(t, b.rpc.CallContext(ctx, &n, "eth_blockNumber"))
		seen[uint64(n)] = true
	}
	require.Equal(t, map[uint64]bool{real: true, real - 3: true}, seen)
}

func TestRefuseMethod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.proxy.Set(rpcproxy.Faults{Refuse: map[string]string{"eth_getLogs": "logs are unavailable on this node"}})
	require.ErrorContains(t, logs(b.rpc, 0, 0), "logs are unavailable on this node")
	elems := []rpc.BatchElem{{Method: "eth_getLogs", Args: []any{map[string]any{"fromBlock": "0x0", "toBlock": "0x0"}},
		Result: new([]any)}, {Method: "eth_chainId", Result: new(hexutil.Uint64)}}
	require.NoError(t, b.rpc.BatchCallContext(context.Background(), elems))
	require.ErrorContains(t, elems[0].Error, "unavailable", "refused in a batch too")
	require.NoError(t, elems[1].Error)
	b.proxy.Update(func(f *rpcproxy.Faults) { f.Refuse = nil })
	require.NoError(t, logs(b.rpc, 0, 0))
	require.Equal(t, 2, b.proxy.Refused(rpcproxy.RefusedMethod))
}

func TestDropClosesConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var n hexutil.Uint64
	b.proxy.Set(rpcproxy.Faults{Drop: 1})
	require.Error(t, b.rpc.CallContext(ctx, &n, "eth_blockNumber"))
	require.NoError(t, b.rpc.CallContext(ctx, &n, "eth_blockNumber"))

	// DropAfter relays first: the node mined the block, the caller
	// never heard.
	b.proxy.Set(rpcproxy.Faults{DropAfter: 1})
	before := uint64(n)
	require.Error(t, b.rpc.CallContext(ctx, nil, "evm_mine"))
	require.NoError(t, b.rpc.CallContext(ctx, &n, "eth_blockNumber"))
	require.Equal(t, before+1, uint64(n))
	require.Equal(t, 2, b.proxy.Refused(rpcproxy.RefusedDropped))
	require.Equal(t, 3, b.proxy.Calls("eth_blockNumber"))
}
