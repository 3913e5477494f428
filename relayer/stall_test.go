package relayer_test

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// losingNode is the node, except that it accepts the first transaction
// sent and loses it (answers OK, passes nothing on): a node that evicted
// it, or a provider whose node behind the load balancer never had it.
// With stranded set, it answers re-sends of the lost bytes "already
// known" and still passes nothing on: anvil filing a transaction that
// came while it mined the one before as waiting for that one, for good.
type losingNode struct {
	*ethclient.Client
	stranded bool

	mu    sync.Mutex
	lost  common.Hash
	sends map[common.Hash]int
}

func (n *losingNode) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	n.mu.Lock()
	if n.sends == nil {
		n.sends = map[common.Hash]int{}
	}
	n.sends[tx.Hash()]++
	first := n.lost == (common.Hash{})
	if first {
		n.lost = tx.Hash()
	}
	lost := tx.Hash() == n.lost
	n.mu.Unlock()
	switch {
	case first:
		return nil
	case lost && n.stranded:
		return errors.New("already known")
	}
	return n.Client.SendTransaction(ctx, tx)
}

// BatchCallContext passes batches on (how the relayer asks the node what
// it is), except one with sends in it, which it refuses whole, so each
// send comes through SendTransaction.
func (n *losingNode) BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error {
	for _, e := range batch {
		if e.Method == "eth_sendRawTransaction" {
			return errors.New("losingNode: sends one at a time")
		}
	}
	return n.Client.Client().BatchCallContext(ctx, batch)
}

func (n *losingNode) sent(h common.Hash) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sends[h]
}

// sendThrough sends 7 wei with the relayer on node (wrapping the bundle's
// anvil, started with opts) and config, and returns the confirmed send,
// its broadcasts and how long it took, after checking it is one
// transaction, paid once.
func sendThrough(t *testing.T, node *losingNode, opts anviltest.Options, config relayer.Config) (*relayer.Transaction, []relayer.Broadcast, time.Duration) {
	t.Helper()
	tb := setup(t, setupOpts{node: opts, config: config,
		backend: func(c *ethclient.Client) relayer.Backend { node.Client = c; return node }})
	to := freshAddress(t)
	start := time.Now()
	tb.queue(t, relayer.Request{ExternalID: ext(t, 0), Wallet: "ops", ChainID: chainID, To: to, Value: big.NewInt(7)})
	got := tb.waitFinal(t, ext(t, 0))
	took := time.Since(start)
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	bs, err := tb.r.Broadcasts(context.Background(), got.TxID)
	require.NoError(t, err)
	require.Equal(t, 1, tb.finalCalls(ext(t, 0)))
	require.Equal(t, uint64(1), tb.nonce(t))
	require.Equal(t, int64(7), tb.balance(t, to).Int64())
	return got, bs, took
}

// A send the node accepted and then lost is sent again, the same bytes,
// once the node's pending nonce shows it holds nothing at the wallet's next
// nonce: long before BumpAfter, and without a fee bump.
func TestLostNextTransactionIsSentAgain(t *testing.T) {
	t.Parallel()
	node := &losingNode{}
	got, bs, took := sendThrough(t, node, anviltest.Options{}, relayer.Config{BumpAfter: time.Hour})
	require.Less(t, took, time.Minute, "not left to BumpAfter")
	require.Equal(t, node.lost, got.Hash, "the lost bytes themselves were mined")
	require.Equal(t, 2, node.sent(node.lost), "sent once, lost, sent again once")
	require.Len(t, bs, 1, "no replacement")
}

// A send the node says it holds but never mines at the wallet's next nonce
// (its pending nonce does not count it) is replaced at once, not after
// BumpAfter, and stays one transaction.
func TestStrandedNextTransactionIsReplaced(t *testing.T) {
	t.Parallel()
	node := &losingNode{stranded: true}
	got, bs, took := sendThrough(t, node, anviltest.Options{}, relayer.Config{BumpAfter: time.Hour})
	require.Less(t, took, time.Minute, "not left to BumpAfter")
	require.NotEqual(t, node.lost, got.Hash, "the replacement was mined")
	require.Len(t, bs, 2, "the stranded bytes and one replacement")
	require.Equal(t, bs[0].Nonce, bs[1].Nonce)
}

// On a node that mines blocks on its own clock rather than each
// transaction on arrival, "already known" for bytes its pending count
// leaves out is not taken as stranded (a provider's pending count may lag
// its mempool): the send waits for BumpAfter as any stuck send, and is
// then replaced, one transaction all the same.
func TestStrandedOnABlockClockWaitsForTheBump(t *testing.T) {
	t.Parallel()
	node := &losingNode{stranded: true}
	const bumpAfter = 2 * time.Second
	got, bs, _ := sendThrough(t, node, anviltest.Options{BlockTime: 200 * time.Millisecond}, relayer.Config{BumpAfter: bumpAfter})
	require.NotEqual(t, node.lost, got.Hash, "the replacement was mined")
	require.Greater(t, node.sent(node.lost), 1, "the lost bytes were sent again first")
	require.Len(t, bs, 2)
	require.GreaterOrEqual(t, bs[1].CreatedAt.Sub(bs[0].CreatedAt), bumpAfter, "replaced at BumpAfter, not before")
}
