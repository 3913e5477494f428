package relayer_test

import (
	"context"
	"encoding/hex"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// countingBackend counts eth_sendRawTransaction calls.
type countingBackend struct {
	*ethclient.Client
	sends atomic.Int64
}

func (b *countingBackend) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	b.sends.Add(1)
	return b.Client.SendTransaction(ctx, tx)
}

// TestForgottenSendRefusedForFundsFails: a send in the mempool of a node
// that then restarts (fresh chain: the wallet holds nothing, the mempool
// is empty) is refused for lack of funds on its next broadcast. Nothing of
// it is left anywhere the node knows, so it fails with the reason within a
// few broadcasts, instead of re-broadcasting at every poll while its caller
// waits (seen: 246 times in 4 minutes).
func TestForgottenSendRefusedForFundsFails(t *testing.T) {
	t.Parallel()
	counter := &countingBackend{}
	tb := setup(t, setupOpts{noClient: true, node: anviltest.Options{NoMining: true},
		config:  relayer.Config{BumpAfter: 200 * time.Millisecond},
		backend: func(c *ethclient.Client) relayer.Backend { counter.Client = c; return counter }})
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	w, err := relayer.WalletFromKey(hex.EncodeToString(crypto.FromECDSA(key)))
	require.NoError(t, err)
	tb.node.Call(nil, "anvil_setBalance", w.Address(), "0xde0b6b3a7640000")
	tb.r = tb.newRelayer(t, relayer.Config{Wallets: map[string]*relayer.Wallet{"fresh": w},
		Networks: map[uint64]relayer.Backend{chainID: counter}, BumpAfter: 200 * time.Millisecond})
	tb.startClient(t, tb.r)

	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), Wallet: "fresh", To: freshAddress(t), Value: big.NewInt(5)})
	tb.broadcasts(t, ext(t, 1), 1)
	tb.node.Restart()
	start := time.Now()
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusFailed, got.Status)
	require.Contains(t, got.Error, "insufficient funds for gas * price + value: wallet "+w.Address().Hex()+" has 0 wei, needs")
	require.Contains(t, got.Error, "accepted and then lost")
	require.True(t, got.Accepted)
	require.Less(t, time.Since(start), 10*time.Second)
	// The first broadcast, one bump refused, the original re-sent and
	// refused: then it stops.
	require.LessOrEqual(t, counter.sends.Load(), int64(4), "broadcasts are bounded")
	n := counter.sends.Load()
	time.Sleep(time.Second)
	require.Equal(t, n, counter.sends.Load(), "nothing is broadcast after the send failed")
}

// TestBumpRefusedForFundsKeepsOriginal: a bump the wallet cannot pay for
// while the original waits in the mempool does not end the send: the
// original is still there ("already known") and is mined once a block
// comes.
func TestBumpRefusedForFundsKeepsOriginal(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true, node: anviltest.Options{NoMining: true}})
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	w, err := relayer.WalletFromKey(hex.EncodeToString(crypto.FromECDSA(key)))
	require.NoError(t, err)
	tb.node.Call(nil, "anvil_setBalance", w.Address(), "0xde0b6b3a7640000")
	tb.r = tb.newRelayer(t, relayer.Config{Wallets: map[string]*relayer.Wallet{"fresh": w}, BumpAfter: 200 * time.Millisecond})
	tb.startClient(t, tb.r)
	to := freshAddress(t)
	// Value leaves just enough for the first broadcast's fees, not a bump's.
	var bal big.Int
	bal.SetString("de0b6b3a7640000", 16)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), Wallet: "fresh", To: to,
		Value: new(big.Int).Sub(&bal, big.NewInt(21_000*4_000_000_000)), GasLimit: 21_000, MaxFeePerGas: gwei(100)})
	tb.broadcasts(t, ext(t, 1), 1)
	var got *relayer.Transaction
	waitFor(t, "a bump refused for funds", func() bool {
		got, err = tb.r.Get(context.Background(), ext(t, 1))
		require.NoError(t, err)
		return strings.Contains(got.Error, "insufficient funds")
	})
	time.Sleep(500 * time.Millisecond) // more refused bumps
	got, err = tb.r.Get(context.Background(), ext(t, 1))
	require.NoError(t, err)
	require.Equal(t, relayer.StatusInMempool, got.Status, got.Error)
	tb.node.Mine(1)
	got = tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
}
