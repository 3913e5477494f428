package relayer_test

import (
	"context"
	"encoding/hex"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// broadcasts waits until the send has at least n recorded broadcasts
// accepted by the node and returns them.
func (tb *testBundle) broadcasts(t *testing.T, externalID string, n int) []relayer.Broadcast {
	t.Helper()
	var out []relayer.Broadcast
	waitFor(t, "broadcasts", func() bool {
		got, err := tb.r.Get(context.Background(), externalID)
		if err != nil {
			return false
		}
		bs, err := tb.r.Broadcasts(context.Background(), got.TxID)
		require.NoError(t, err)
		sent := 0
		for _, b := range bs {
			if b.Sent {
				sent++
			}
		}
		out = bs
		return sent >= n
	})
	return out
}

func TestGasBumpKeepsTxIDChangesHash(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: 150 * time.Millisecond}})
	to := freshAddress(t)
	before := tb.nonce(t)
	queued, _ := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(42)})

	bs := tb.broadcasts(t, ext(t, 1), 3)
	seen := map[string]bool{}
	for i, b := range bs {
		require.Equal(t, "send", b.Kind)
		require.Equal(t, bs[0].Nonce, b.Nonce)
		require.False(t, seen[b.Hash.Hex()], "hash repeated")
		seen[b.Hash.Hex()] = true
		if i > 0 {
			// Every bump raises both fees by at least 10%.
			for _, pair := range [][2]*big.Int{{bs[i-1].MaxFee, b.MaxFee}, {bs[i-1].MaxPriorityFee, b.MaxPriorityFee}} {
				min := new(big.Int).Mul(pair[0], big.NewInt(110))
				require.GreaterOrEqual(t, new(big.Int).Mul(pair[1], big.NewInt(100)).Cmp(min), 0, "bump below +10%%")
			}
		}
	}

	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, queued.TxID, got.TxID)
	require.Equal(t, before+1, tb.nonce(t))
	require.Equal(t, int64(42), tb.balance(t, to).Int64())

	// Exactly one of the hashes was mined, and it is the one reported.
	bs, err := tb.r.Broadcasts(context.Background(), got.TxID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(bs), 3)
	mined := 0
	for _, b := range bs {
		_, err := tb.eth.TransactionReceipt(context.Background(), b.Hash)
		if err == nil {
			mined++
			require.Equal(t, got.Hash, b.Hash)
		} else {
			require.ErrorIs(t, err, ethereum.NotFound)
		}
	}
	require.Equal(t, 1, mined)
}

func TestGasBumpStopsAtFeeCap(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: 100 * time.Millisecond}})
	head, err := tb.eth.HeaderByNumber(context.Background(), nil)
	require.NoError(t, err)
	tip, err := tb.eth.SuggestGasTipCap(context.Background())
	require.NoError(t, err)
	// Room for exactly one bump above the first max fee (2 × base + tip).
	first := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	limit := new(big.Int).Div(new(big.Int).Mul(first, big.NewInt(125)), big.NewInt(100))
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: freshAddress(t), Value: big.NewInt(1), MaxFeePerGas: limit})
	bs := tb.broadcasts(t, ext(t, 1), 2)
	time.Sleep(600 * time.Millisecond) // several more bump intervals
	got, err := tb.r.Get(context.Background(), ext(t, 1))
	require.NoError(t, err)
	bs, err = tb.r.Broadcasts(context.Background(), got.TxID)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	for _, b := range bs {
		require.LessOrEqual(t, b.MaxFee.Cmp(limit), 0)
	}
	tb.node.Mine(1)
	require.Equal(t, relayer.StatusConfirmed, tb.waitFinal(t, ext(t, 1)).Status)
}

func TestDeadlineExpiresWithNoop(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: time.Minute}})
	to := freshAddress(t)
	before := tb.nonce(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5), Deadline: time.Now().Add(700 * time.Millisecond)})
	bs := tb.broadcasts(t, ext(t, 1), 2)
	require.Equal(t, "send", bs[0].Kind)
	require.Equal(t, "cancel", bs[len(bs)-1].Kind)
	require.Equal(t, bs[0].Nonce, bs[len(bs)-1].Nonce)

	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusExpired, got.Status)
	require.Equal(t, bs[len(bs)-1].Hash, got.Hash)
	require.Equal(t, before+1, tb.nonce(t)) // the no-op used the nonce
	require.Zero(t, tb.balance(t, to).Sign())
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))
}

func TestCancelReplacesWithNoop(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: time.Minute}})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5)})
	tb.broadcasts(t, ext(t, 1), 1)
	ok, err := tb.r.Cancel(context.Background(), ext(t, 1))
	require.NoError(t, err)
	require.True(t, ok)
	bs := tb.broadcasts(t, ext(t, 1), 2)
	require.Equal(t, "cancel", bs[len(bs)-1].Kind)
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusCancelled, got.Status)
	require.Zero(t, tb.balance(t, to).Sign())

	ok, err = tb.r.Cancel(context.Background(), ext(t, 1))
	require.NoError(t, err)
	require.False(t, ok, "a final send cannot be cancelled")
}

func TestNonceUsedOutsideIsHealed(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: freshAddress(t), Value: big.NewInt(1)})
	first := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, first.Status)

	// The same key sends twice without rflow: the relayer's stored next
	// nonce is now behind the chain.
	tb.sendOutside(t, *first.Nonce+1, gwei(1))
	tb.sendOutside(t, *first.Nonce+2, gwei(1))
	waitFor(t, "outside sends mined", func() bool { return tb.nonce(t) == *first.Nonce+3 })

	for i := 2; i <= 3; i++ {
		tb.queue(t, relayer.Request{ExternalID: ext(t, i), To: freshAddress(t), Value: big.NewInt(1)})
	}
	n2, n3 := tb.waitFinal(t, ext(t, 2)), tb.waitFinal(t, ext(t, 3))
	require.Equal(t, relayer.StatusConfirmed, n2.Status, n2.Error)
	require.Equal(t, relayer.StatusConfirmed, n3.Status, n3.Error)
	require.ElementsMatch(t, []uint64{*first.Nonce + 3, *first.Nonce + 4}, []uint64{*n2.Nonce, *n3.Nonce})
	require.Equal(t, *first.Nonce+5, tb.nonce(t))
}

func TestRecoverReconcilesNonce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	tb.sendOutside(t, 0, gwei(1))
	waitFor(t, "outside send mined", func() bool { return tb.nonce(t) == 1 })
	res, err := tb.r.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, relayer.RecoverResult{Reconciled: 1}, res)
	var next int64
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT next_nonce FROM relayer.nonces WHERE address = $1`,
		tb.wallet.Address().Hex()).Scan(&next))
	require.Equal(t, int64(1), next)

	// A node that does not answer is counted, not fatal.
	tb.node.Stop()
	res, err = tb.r.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, relayer.RecoverResult{Unreachable: 1}, res)
}

func TestOutsideReplacementEndsReplaced(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: time.Minute}})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(9)})
	bs := tb.broadcasts(t, ext(t, 1), 1)
	// Someone with the key replaces the pending send on purpose.
	tb.sendOutside(t, bs[0].Nonce, gwei(50))
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusReplaced, got.Status)
	require.Contains(t, got.Error, "did not send")
	require.Zero(t, tb.balance(t, to).Sign())
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, bs[0].Nonce+1, tb.nonce(t), "the relayer must not re-send a replaced send")
}

// legacyChain hides the base fee of the head (what fees are quoted from),
// as a pre-London chain would. Blocks by number keep theirs: their hashes
// must stay the node's.
type legacyChain struct{ *ethclient.Client }

func (l legacyChain) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	h, err := l.Client.HeaderByNumber(ctx, n)
	if h != nil && n == nil {
		h.BaseFee = nil
	}
	return h, err
}

func TestLegacyChainSendsAndBumpsGasPrice(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: 150 * time.Millisecond},
		backend: func(c *ethclient.Client) relayer.Backend { return legacyChain{c} }})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(3)})
	bs := tb.broadcasts(t, ext(t, 1), 2)
	for _, b := range bs {
		require.Nil(t, b.MaxFee)
		require.NotNil(t, b.GasPrice)
	}
	require.GreaterOrEqual(t, new(big.Int).Mul(bs[1].GasPrice, big.NewInt(100)).Cmp(new(big.Int).Mul(bs[0].GasPrice, big.NewInt(110))), 0)
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	tx, _, err := tb.eth.TransactionByHash(context.Background(), got.Hash)
	require.NoError(t, err)
	require.Equal(t, uint8(types.LegacyTxType), tx.Type())
	require.Equal(t, int64(3), tb.balance(t, to).Int64())
}

func TestReorgedSendIsMinedAgainOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: relayer.Config{BumpAfter: 200 * time.Millisecond}})
	to := freshAddress(t)
	before := tb.nonce(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(11), Confirmations: 3})
	var first *relayer.Transaction
	waitFor(t, "mined", func() bool {
		got, err := tb.r.Get(context.Background(), ext(t, 1))
		first = got
		return err == nil && got.Status == relayer.StatusMined
	})
	// The block holding the send is replaced by an empty one.
	tb.node.Reorg(1)
	waitFor(t, "mined again", func() bool {
		got, err := tb.r.Get(context.Background(), ext(t, 1))
		if err != nil || got.Status != relayer.StatusMined {
			return false
		}
		rc, err := tb.eth.TransactionReceipt(context.Background(), got.Hash)
		return err == nil && rc.BlockHash == got.BlockHash && got.BlockHash != first.BlockHash
	})
	tb.node.Mine(2)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, first.TxID, got.TxID)
	require.Equal(t, before+1, tb.nonce(t))
	require.Equal(t, int64(11), tb.balance(t, to).Int64())
}

func TestNonceGapIsFilled(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: 200 * time.Millisecond}})
	ctx := context.Background()
	to := freshAddress(t)
	// Someone else's transaction takes nonce 0 in the mempool, so the send
	// gets nonce 1; then that transaction is dropped, leaving a hole.
	outside := tb.sendOutside(t, 0, gwei(1))
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(8)})
	bs := tb.broadcasts(t, ext(t, 1), 1)
	require.Equal(t, uint64(1), bs[0].Nonce)
	tb.node.Call(nil, "anvil_dropTransaction", outside.Hash())

	waitFor(t, "the hole filled", func() bool {
		n, err := tb.eth.PendingNonceAt(ctx, tb.wallet.Address())
		require.NoError(t, err)
		return n == 2
	})
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, uint64(2), tb.nonce(t))
	require.Equal(t, int64(8), tb.balance(t, to).Int64())
	_, err := tb.eth.TransactionReceipt(ctx, outside.Hash())
	require.ErrorIs(t, err, ethereum.NotFound)
}

func TestPeriodicRecoveryResumesLostJob(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true, config: relayer.Config{StaleAfter: 300 * time.Millisecond}})
	ctx := context.Background()
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(4)})
	// The send's job is lost (say an operator deleted it in River UI).
	tag, err := tb.pool.Exec(ctx, `DELETE FROM river.river_job WHERE kind = 'relayer_send'`)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
	time.Sleep(400 * time.Millisecond)

	tb.startClient(t, tb.r, tb.r.PeriodicJobs(200*time.Millisecond)...)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, int64(4), tb.balance(t, to).Int64())
	var recovers int
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE kind = 'relayer_recover'`).Scan(&recovers))
	require.Positive(t, recovers)
}

// lostReplies sends every transaction but loses the node's reply to the
// first `lose` of them, as a timeout would: the outcome is ambiguous.
type lostReplies struct {
	*ethclient.Client
	mu   sync.Mutex
	lose int
}

func (l *lostReplies) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	err := l.Client.SendTransaction(ctx, tx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose > 0 {
		l.lose--
		return errors.New("Post \"http://127.0.0.1\": context deadline exceeded")
	}
	return err
}

func TestAmbiguousBroadcastSendsOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true},
		backend: func(c *ethclient.Client) relayer.Backend { return &lostReplies{Client: c, lose: 3} }})
	to := freshAddress(t)
	before := tb.nonce(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(6)})
	// The same signed bytes go out until the node's "already known" says
	// they arrived; the transaction is never re-signed.
	bs := tb.broadcasts(t, ext(t, 1), 1)
	require.Len(t, bs, 1)
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, bs[0].Hash, got.Hash)
	require.Equal(t, before+1, tb.nonce(t))
	require.Equal(t, int64(6), tb.balance(t, to).Int64())
}

func TestUnfundedWalletFailsAndReleasesNonce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	broke, err := relayer.WalletFromKey(hex.EncodeToString(crypto.FromECDSA(key)))
	require.NoError(t, err)
	r := tb.newRelayer(t, relayer.Config{Wallets: map[string]*relayer.Wallet{"broke": broke}})
	tb.r = r
	tb.startClient(t, r)
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), Wallet: "broke", To: to, Value: big.NewInt(1)})
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusFailed, got.Status)
	require.Contains(t, got.Error, "insufficient funds")
	var next int64
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT next_nonce FROM relayer.nonces WHERE address = $1`,
		broke.Address().Hex()).Scan(&next))
	require.Zero(t, next, "the unused nonce was given back")
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))

	// Funded, the wallet's next send uses nonce 0: no hole was left.
	tb.node.Call(nil, "anvil_setBalance", broke.Address(), "0xde0b6b3a7640000")
	tb.queue(t, relayer.Request{ExternalID: ext(t, 2), Wallet: "broke", To: to, Value: big.NewInt(1)})
	got = tb.waitFinal(t, ext(t, 2))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, uint64(0), *got.Nonce)
	require.Equal(t, int64(1), tb.balance(t, to).Int64())
}

// beforeFirstSend runs hook right before the first transaction is sent.
type beforeFirstSend struct {
	*ethclient.Client
	once sync.Once
	hook func(tx *types.Transaction)
}

func (b *beforeFirstSend) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	b.once.Do(func() { b.hook(tx) })
	return b.Client.SendTransaction(ctx, tx)
}

func TestNonceHeldInMempoolByOutsiderMovesSend(t *testing.T) {
	t.Parallel()
	var tb *testBundle
	var outside *types.Transaction
	race := &beforeFirstSend{}
	tb = setup(t, setupOpts{node: anviltest.Options{NoMining: true}, config: relayer.Config{BumpAfter: time.Minute},
		backend: func(c *ethclient.Client) relayer.Backend {
			race.Client = c
			// Someone with the key gets a transaction into the mempool at the
			// send's nonce just before the relayer broadcasts it.
			race.hook = func(tx *types.Transaction) { outside = tb.sendOutside(t, tx.Nonce(), gwei(20)) }
			return race
		}})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(12)})
	waitFor(t, "the send moved and accepted", func() bool {
		got, err := tb.r.Get(context.Background(), ext(t, 1))
		return err == nil && got.Status == relayer.StatusInMempool && got.Nonce != nil && *got.Nonce == 1
	})
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, uint64(2), tb.nonce(t))
	require.Equal(t, int64(12), tb.balance(t, to).Int64())
	rc, err := tb.eth.TransactionReceipt(context.Background(), outside.Hash())
	require.NoError(t, err, "the outsider's transaction was not replaced")
	require.Equal(t, uint64(1), rc.Status)
}
