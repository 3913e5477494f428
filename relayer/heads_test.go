package relayer_test

import (
	"context"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store/storetest"
)

// pollCounter is the node, counting the calls a send's polls make.
type pollCounter struct {
	relayer.Backend
	receipts, nonces, heads atomic.Int64
}

func (p *pollCounter) TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	p.receipts.Add(1)
	return p.Backend.TransactionReceipt(ctx, hash)
}

func (p *pollCounter) NonceAt(ctx context.Context, a common.Address, n *big.Int) (uint64, error) {
	p.nonces.Add(1)
	return p.Backend.NonceAt(ctx, a, n)
}

func (p *pollCounter) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	if n == nil {
		p.heads.Add(1)
	}
	return p.Backend.HeaderByNumber(ctx, n)
}

// A send waiting in the mempool asks the node for its receipt and its
// wallet's nonce only when a block came since it last asked: on a chain
// that mines no block for three seconds, its polls (each of which reads
// the head, shared) cost a call or two of each, not two per poll; the send
// is confirmed at the first block.
func TestMempoolPollsAskOncePerBlock(t *testing.T) {
	t.Parallel()
	var node *pollCounter
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{PollInterval: 20 * time.Millisecond},
		backend: func(c *ethclient.Client) relayer.Backend {
			node = &pollCounter{Backend: c}
			return node
		}})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5)})
	tb.broadcasts(t, ext(t, 1), 1)
	receipts, nonces, heads := node.receipts.Load(), node.nonces.Load(), node.heads.Load()
	time.Sleep(3 * time.Second)
	require.LessOrEqual(t, node.receipts.Load()-receipts, int64(2), "receipt asked with no new block")
	require.LessOrEqual(t, node.nonces.Load()-nonces, int64(2), "nonce asked with no new block")
	require.GreaterOrEqual(t, node.heads.Load()-heads, int64(5), "the send was polled")
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, int64(5), tb.balance(t, to).Int64())
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))
}

// The same on geth --dev mining a block every 3 s, through chain.Eth (what
// rflow start passes): a send queued just after a block waits for the next
// in the mempool, polled every 20 ms, asking for its receipt only when a
// block came; it is confirmed once, its hook run once.
func TestMempoolPollsAskOncePerBlockOnGeth(t *testing.T) {
	t.Parallel()
	node := gethtest.Start(t, gethtest.Options{Period: 3 * time.Second})
	c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{node.URL}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tb := &testBundle{pool: storetest.Pool(t), eth: node.Client(), finals: map[string]int{}, keyIdx: 1,
		chainID: gethtest.ChainID}
	counter := &pollCounter{Backend: c.Eth()}
	tb.r = tb.newRelayer(t, relayer.Config{PollInterval: 20 * time.Millisecond,
		Networks: map[uint64]relayer.Backend{gethtest.ChainID: counter}})
	tb.startClient(t, tb.r)
	ctx := context.Background()
	head, err := tb.eth.BlockNumber(ctx)
	require.NoError(t, err)
	waitFor(t, "a new block", func() bool {
		n, err := tb.eth.BlockNumber(ctx)
		return err == nil && n > head
	})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5), ChainID: gethtest.ChainID})
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))
	require.Equal(t, int64(5), tb.balance(t, to).Int64())
	t.Logf("head reads %d, receipt calls %d, nonce calls %d", counter.heads.Load(), counter.receipts.Load(), counter.nonces.Load())
	require.GreaterOrEqual(t, counter.heads.Load(), int64(5), "the send waited several polls")
	// The first run's four looks, the first poll's and the one after the
	// block (main: 15, one per poll).
	require.LessOrEqual(t, counter.receipts.Load(), int64(7), "receipts asked at every poll")
	require.LessOrEqual(t, counter.nonces.Load(), int64(3), "nonce asked at every poll")
}
