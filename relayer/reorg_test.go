package relayer_test

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// The reorg tests orphan the block a send was mined in, at reorg depths
// 1 to 5, while the send waits for depth+1 confirmations, and check the send
// is tracked again on the new chain: final once, at real depth there, one
// transaction at its nonce, and the lost block journaled.

// minedAt waits until the send is mined and journaled in a block of the
// node's canonical chain other than not (the zero hash: any).
func (tb *testBundle) minedAt(t *testing.T, externalID string, not common.Hash) *relayer.Transaction {
	t.Helper()
	var got *relayer.Transaction
	waitFor(t, "mined on the canonical chain", func() bool {
		var err error
		if got, err = tb.r.Get(context.Background(), externalID); err != nil || got.Status != relayer.StatusMined ||
			got.BlockHash == not {
			return false
		}
		h, err := tb.eth.HeaderByNumber(context.Background(), new(big.Int).SetUint64(got.BlockNumber))
		return err == nil && h.Hash() == got.BlockHash
	})
	return got
}

// raw returns the signed bytes of a transaction the node knows.
func (tb *testBundle) raw(t *testing.T, hash common.Hash) []byte {
	t.Helper()
	tx, _, err := tb.eth.TransactionByHash(context.Background(), hash)
	require.NoError(t, err)
	b, err := tx.MarshalBinary()
	require.NoError(t, err)
	return b
}

// filler signs a 0-value self-transfer from dev key 3 (not the relayer's):
// put in the new blocks of a reorg, it makes them differ from the blocks
// they replace even when they hold the same send.
func (tb *testBundle) filler(t *testing.T) []byte {
	t.Helper()
	head, err := tb.eth.HeaderByNumber(context.Background(), nil)
	require.NoError(t, err)
	return tb.fillerPaying(t, new(big.Int).Mul(head.BaseFee, big.NewInt(3)))
}

// fillerPaying is filler with a fee cap of feeCap plus a 1 gwei tip.
func (tb *testBundle) fillerPaying(t *testing.T, feeCap *big.Int) []byte {
	t.Helper()
	ctx := context.Background()
	key, from := anviltest.Key(t, 3)
	n, err := tb.eth.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	tip := gwei(1)
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(chainID), Nonce: n, GasTipCap: tip,
		GasFeeCap: new(big.Int).Add(feeCap, tip), Gas: 21000, To: &from, Value: new(big.Int)})
	tx, err = types.SignTx(tx, types.LatestSignerForChainID(big.NewInt(chainID)), key)
	require.NoError(t, err)
	b, err := tx.MarshalBinary()
	require.NoError(t, err)
	return b
}

// stillWaiting checks, over a few polls, that the send is not final and
// its FinalHook never ran.
func (tb *testBundle) stillWaiting(t *testing.T, externalID string) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // six polls
	got, err := tb.r.Get(context.Background(), externalID)
	require.NoError(t, err)
	require.False(t, got.Final(), "final before its depth on the canonical chain: %+v", got)
	require.Zero(t, tb.finalCalls(externalID))
}

// reorgedSend queues a send needing depth+1 confirmations, waits until it
// is mined with depth confirmations (one short), and returns it.
func reorgedSend(t *testing.T, tb *testBundle, depth int, to common.Address) *relayer.Transaction {
	t.Helper()
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(int64(100 + depth)), Confirmations: depth + 1})
	first := tb.minedAt(t, ext(t, 1), common.Hash{})
	tb.node.Mine(depth - 1)
	tb.stillWaiting(t, ext(t, 1))
	return first
}

// requireOnce checks the end state every reorg test shares: confirmed in a
// canonical block, the FinalHook called once, one transaction of the wallet
// on chain, the value paid once, and first's block journaled as orphaned.
func requireOnce(t *testing.T, tb *testBundle, first *relayer.Transaction, nonceBefore uint64, to common.Address, value int64) *relayer.Transaction {
	t.Helper()
	ctx := context.Background()
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, first.TxID, got.TxID)
	h, err := tb.eth.HeaderByNumber(ctx, new(big.Int).SetUint64(got.BlockNumber))
	require.NoError(t, err)
	require.Equal(t, h.Hash(), got.BlockHash, "the journaled block is the canonical one")
	require.NotEqual(t, first.BlockHash, got.BlockHash)
	rc, err := tb.eth.TransactionReceipt(ctx, got.Hash)
	require.NoError(t, err)
	require.Equal(t, got.BlockHash, rc.BlockHash)
	head, err := tb.eth.BlockNumber(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, head+1, got.BlockNumber+uint64(got.Confirmations), "final at real depth")
	require.Equal(t, nonceBefore+1, tb.nonce(t), "one transaction at the send's nonce")
	require.Equal(t, value, tb.balance(t, to).Int64())
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))
	orphans, err := tb.r.Orphans(ctx, got.TxID)
	require.NoError(t, err)
	require.Len(t, orphans, 1)
	require.Equal(t, first.BlockNumber, orphans[0].BlockNumber)
	require.Equal(t, first.BlockHash, orphans[0].BlockHash)
	require.Equal(t, first.Hash, orphans[0].Hash)
	require.NotNil(t, got.OrphanedAt)
	return got
}

// TestReorgReincludedSendConfirmsAtNewDepth: the reorg takes the send's
// block away and the new chain holds the send again, in its last new
// block. The send waits for its full depth counted from there, then
// finishes once with the new block.
func TestReorgReincludedSendConfirmsAtNewDepth(t *testing.T) {
	t.Parallel()
	for depth := 1; depth <= 5; depth++ {
		t.Run(fmt.Sprintf("depth%d", depth), func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: 200 * time.Millisecond}})
			to := freshAddress(t)
			before := tb.nonce(t)
			first := reorgedSend(t, tb, depth, to)

			tb.node.ReorgWith(depth, anviltest.ReorgTx{Raw: tb.filler(t)}, anviltest.ReorgTx{Raw: tb.raw(t, first.Hash), Block: depth - 1})
			again := tb.minedAt(t, ext(t, 1), first.BlockHash)
			require.Equal(t, first.BlockNumber+uint64(depth-1), again.BlockNumber)
			require.Equal(t, first.Hash, again.Hash)
			// One confirmation in the new chain; depth more make depth+1.
			tb.node.Mine(depth - 1)
			tb.stillWaiting(t, ext(t, 1))
			tb.node.Mine(1)
			got := requireOnce(t, tb, first, before, to, int64(100+depth))
			require.Equal(t, again.BlockHash, got.BlockHash)
			require.Len(t, tb.broadcasts(t, ext(t, 1), 1), 1, "nothing re-sent: the chain had it")
		})
	}
}

// TestReorgDroppedSendIsResentWithItsOwnBytes: the reorg's new blocks do
// not hold the send and anvil keeps none of the orphaned transactions in
// its mempool. The relayer sends the very bytes that were mined again (same
// nonce, same hash, no re-signing), and the send finishes once at its depth
// on the new chain.
func TestReorgDroppedSendIsResentWithItsOwnBytes(t *testing.T) {
	t.Parallel()
	for depth := 1; depth <= 5; depth++ {
		t.Run(fmt.Sprintf("depth%d", depth), func(t *testing.T) {
			t.Parallel()
			// BumpAfter long past the test: a bump here would be a bug.
			tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: time.Hour}})
			to := freshAddress(t)
			before := tb.nonce(t)
			first := reorgedSend(t, tb, depth, to)

			tb.node.ReorgWith(depth, anviltest.ReorgTx{Raw: tb.filler(t)})
			_, err := tb.eth.TransactionReceipt(context.Background(), first.Hash)
			require.ErrorIs(t, err, ethereum.NotFound, "anvil dropped the orphaned send")
			// Automine puts the re-sent bytes in the next block.
			again := tb.minedAt(t, ext(t, 1), first.BlockHash)
			require.Equal(t, first.BlockNumber+uint64(depth), again.BlockNumber)
			if depth > 1 {
				tb.node.Mine(depth - 1)
				tb.stillWaiting(t, ext(t, 1))
			}
			tb.node.Mine(1)
			got := requireOnce(t, tb, first, before, to, int64(100+depth))
			require.Equal(t, first.Hash, got.Hash, "the same signed bytes")
			bs := tb.broadcasts(t, ext(t, 1), 1)
			require.Len(t, bs, 1, "no re-signing")
		})
	}
}

// staleReceipts serves, for a transaction the node has no receipt for, the
// last receipt it saw for it: a provider whose receipt index lags behind a
// reorg. Its head and blocks are the node's.
type staleReceipts struct {
	*ethclient.Client
	mu   sync.Mutex
	seen map[common.Hash]*types.Receipt
}

func (s *staleReceipts) TransactionReceipt(ctx context.Context, h common.Hash) (*types.Receipt, error) {
	rc, err := s.Client.TransactionReceipt(ctx, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.seen[h] = rc
	case s.seen[h] != nil && err == ethereum.NotFound:
		return s.seen[h], nil
	}
	return rc, err
}

// TestStaleReceiptOfOrphanedBlockIsNotCounted: after the reorg the node
// still serves the send's receipt from the orphaned block. Counting the
// head above that block's number would confirm a transaction that is on no
// chain; the relayer checks the receipt's block hash against the canonical
// block at that height at every poll, sends the bytes again and confirms
// them where they are mined now.
func TestStaleReceiptOfOrphanedBlockIsNotCounted(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: time.Hour}, backend: func(c *ethclient.Client) relayer.Backend {
		return &staleReceipts{Client: c, seen: map[common.Hash]*types.Receipt{}}
	}})
	to := freshAddress(t)
	before := tb.nonce(t)
	first := reorgedSend(t, tb, 1, to)
	// Without the canonical check the next poll after these blocks would
	// count them on the orphaned block and confirm.
	tb.node.ReorgWith(1, anviltest.ReorgTx{Raw: tb.filler(t)})
	tb.minedAt(t, ext(t, 1), first.BlockHash)
	tb.node.Mine(1)
	got := requireOnce(t, tb, first, before, to, 101)
	require.Equal(t, first.Hash, got.Hash)
}

// TestReorgOntoHigherBaseFeeResignsAtSameNonce: the new chain's base fee is
// above the fee cap of the bytes that were mined, so the node refuses them.
// Only then is the send re-signed, at the same nonce (recorded before it is
// sent), and it finishes once with the new hash.
func TestReorgOntoHigherBaseFeeResignsAtSameNonce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: time.Hour}})
	to := freshAddress(t)
	before := tb.nonce(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(55), Confirmations: 2, MaxFeePerGas: gwei(10_000)})
	first := tb.minedAt(t, ext(t, 1), common.Hash{})
	tb.stillWaiting(t, ext(t, 1))

	tb.node.Call(nil, "anvil_setNextBlockBaseFeePerGas", (*hexBig)(gwei(500)))
	tb.node.ReorgWith(1, anviltest.ReorgTx{Raw: tb.fillerPaying(t, gwei(5_000))})
	h, err := tb.eth.HeaderByNumber(context.Background(), nil)
	require.NoError(t, err)
	require.Positive(t, h.BaseFee.Cmp(gwei(100)), "the new chain's base fee is high: %s", h.BaseFee)

	again := tb.minedAt(t, ext(t, 1), first.BlockHash)
	require.NotEqual(t, first.Hash, again.Hash, "re-signed")
	tb.node.Mine(1)
	got := requireOnce(t, tb, first, before, to, 55)
	require.Equal(t, again.Hash, got.Hash)
	bs := tb.broadcasts(t, ext(t, 1), 2)
	require.Len(t, bs, 2)
	require.Equal(t, bs[0].Nonce, bs[1].Nonce, "the same nonce")
	require.Equal(t, got.Hash, bs[1].Hash)
}

type hexBig big.Int

func (h *hexBig) MarshalText() ([]byte, error) { return []byte("0x" + (*big.Int)(h).Text(16)), nil }

// unanswered fails the next `fail` broadcasts as a lost connection would,
// without sending them.
type unanswered struct {
	*ethclient.Client
	mu   sync.Mutex
	fail int
}

func (u *unanswered) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fail > 0 {
		u.fail--
		return fmt.Errorf("read tcp: connection reset by peer")
	}
	return u.Client.SendTransaction(ctx, tx)
}

// TestReorgDroppedSendResendsSameBytesAfterNoAnswer: the node does not
// answer the first re-sends after the reorg. The send stays mined (the lost
// block not yet journaled) and the same bytes go out again at the next
// polls, not after BumpAfter and never re-signed.
func TestReorgDroppedSendResendsSameBytesAfterNoAnswer(t *testing.T) {
	t.Parallel()
	var u *unanswered
	tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: time.Hour}, backend: func(c *ethclient.Client) relayer.Backend {
		u = &unanswered{Client: c}
		return u
	}})
	to := freshAddress(t)
	before := tb.nonce(t)
	first := reorgedSend(t, tb, 2, to)
	u.mu.Lock()
	u.fail = 2
	u.mu.Unlock()
	tb.node.ReorgWith(2, anviltest.ReorgTx{Raw: tb.filler(t)})
	tb.minedAt(t, ext(t, 1), first.BlockHash)
	u.mu.Lock()
	require.Zero(t, u.fail)
	u.mu.Unlock()
	tb.node.Mine(2)
	got := requireOnce(t, tb, first, before, to, 102)
	require.Equal(t, first.Hash, got.Hash)
	require.Len(t, tb.broadcasts(t, ext(t, 1), 1), 1)
}
