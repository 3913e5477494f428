package relayer_test

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/relayer"
)

// arrivals is a node whose eth_sendRawTransaction holds back
// even nonces for a moment before passing them on, and notes the nonce of
// every transaction in the order they reach the node: sends racing each
// other would overtake the slow ones.
type arrivals struct {
	*ethclient.Client
	mu     sync.Mutex
	nonces []uint64
}

func (a *arrivals) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if tx.Nonce()%2 == 0 {
		time.Sleep(15 * time.Millisecond)
	}
	a.mu.Lock()
	a.nonces = append(a.nonces, tx.Nonce())
	a.mu.Unlock()
	return a.Client.SendTransaction(ctx, tx)
}

func (a *arrivals) seen() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.nonces...)
}

// queueBurst commits n sends of 1 wei each to `to` in one transaction.
func (tb *testBundle) queueBurst(t *testing.T, n int, to common.Address) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		for i := range n {
			if _, _, err := tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: ext(t, i), Wallet: "ops", ChainID: chainID,
				To: to, Value: big.NewInt(1)}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// A burst of one wallet's sends reaches the node in nonce order from one
// process, though 20 workers broadcast them at once and the node is slow
// to take every other one.
func TestBurstReachesNodeInNonceOrder(t *testing.T) {
	t.Parallel()
	node := &arrivals{}
	tb := setup(t, setupOpts{backend: func(c *ethclient.Client) relayer.Backend { node.Client = c; return node }})
	const burst = 12
	to := freshAddress(t)
	tb.queueBurst(t, burst, to)
	for i := range burst {
		got := tb.waitFinal(t, ext(t, i))
		require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	}
	seen := node.seen()
	require.Len(t, seen, burst, "one broadcast per send")
	for i, n := range seen {
		require.Equal(t, uint64(i), n, "broadcasts in the order they reached the node: %v", seen)
	}
	require.Equal(t, uint64(burst), tb.nonce(t))
	require.Equal(t, int64(burst), tb.balance(t, to).Int64())
}

// Two relayers (two processes' worth: each its own River client and its
// own turns) on one database work one wallet's burst, each taking whichever
// jobs its client fetches: each hands the node its own sends in nonce
// order, and no nonce is used twice, none skipped.
func TestTwoRelayersOneWalletNeverReuseANonce(t *testing.T) {
	t.Parallel()
	nodeA, nodeB := &arrivals{}, &arrivals{}
	tb := setup(t, setupOpts{backend: func(c *ethclient.Client) relayer.Backend { nodeA.Client = c; return nodeA }})
	nodeB.Client = tb.eth
	rb := tb.newRelayer(t, relayer.Config{Networks: map[uint64]relayer.Backend{chainID: nodeB}})
	tb.startClient(t, rb)
	const burst = 24
	to := freshAddress(t)
	tb.queueBurst(t, burst, to)
	nonces := map[uint64]string{}
	for i := range burst {
		got := tb.waitFinal(t, ext(t, i))
		require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
		require.NotContains(t, nonces, *got.Nonce, "nonce %d used twice", *got.Nonce)
		nonces[*got.Nonce] = got.ExternalID
	}
	for n := range uint64(burst) {
		require.Contains(t, nonces, n, "no nonce skipped")
	}
	a, b := nodeA.seen(), nodeB.seen()
	require.Len(t, append(a, b...), burst, "one broadcast per send")
	require.IsIncreasing(t, a, "relayer A's broadcasts in nonce order")
	require.IsIncreasing(t, b, "relayer B's broadcasts in nonce order")
	require.Equal(t, uint64(burst), tb.nonce(t))
	require.NotEmpty(t, a, "relayer A sent some")
	require.NotEmpty(t, b, "relayer B sent some")
	require.Equal(t, int64(burst), tb.balance(t, to).Int64())
}
