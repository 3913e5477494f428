package relayer_test

import (
	"context"
	"encoding/hex"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store/storetest"
)

// simChainID is go-ethereum's simulated backend's chain id.
const simChainID = 1337

// nodeMinimum is the tip the simulated geth's transaction pool requires
// (geth's --txpool.pricelimit): its gas price oracle suggests 1 wei, as a
// geth --dev does, so a send at the suggested tip is refused with
// "transaction gas price below minimum: gas tip cap 1, minimum needed 1000".
const nodeMinimum = 1000

// startPricedGeth starts go-ethereum's own node in process (its real
// transaction pool and RPC errors) with a price limit of nodeMinimum,
// the given accounts funded, mining a block every 50ms.
func startPricedGeth(t *testing.T, funded ...common.Address) *ethclient.Client {
	t.Helper()
	alloc := types.GenesisAlloc{}
	for _, a := range funded {
		alloc[a] = types.Account{Balance: new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))}
	}
	sim := simulated.NewBackend(alloc, func(_ *node.Config, c *ethconfig.Config) {
		c.TxPool.PriceLimit = nodeMinimum
		c.Miner.GasPrice = big.NewInt(1) // as geth --dev: the oracle's default, and the miner's floor
	})
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sim.Commit()
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
		_ = sim.Close()
	})
	// The simulated client hides its *ethclient.Client (the relayer batches
	// through its rpc.Client); the field is exported, its type is not.
	return reflect.ValueOf(sim.Client()).FieldByName("Client").Interface().(*ethclient.Client)
}

// pricedBundle is a relayer whose wallet "ops" (dev key 1) sends on a
// node that requires a tip of nodeMinimum.
func pricedBundle(t *testing.T, funded ...common.Address) *testBundle {
	t.Helper()
	_, ops := anviltest.Key(t, 1)
	tb := &testBundle{pool: storetest.Pool(t), finals: map[string]int{}, keyIdx: 1}
	tb.eth = startPricedGeth(t, append(funded, ops)...)
	return tb
}

func (tb *testBundle) pricedRelayer(t *testing.T, wallets map[string]*relayer.Wallet) *relayer.Relayer {
	t.Helper()
	return tb.newRelayer(t, relayer.Config{Wallets: wallets, Networks: map[uint64]relayer.Backend{simChainID: tb.eth}})
}

// minedTip is the tip of the transaction the send confirmed with.
func (tb *testBundle) minedTip(t *testing.T, got *relayer.Transaction) *big.Int {
	t.Helper()
	tx, _, err := tb.eth.TransactionByHash(context.Background(), got.Hash)
	require.NoError(t, err)
	return tx.GasTipCap()
}

// A node that states a minimum tip gets it: the send is re-signed at the
// same nonce at that tip and confirms, and the wallet's next send starts at
// the learned minimum (one broadcast, not refused first). Before, the
// refused bytes were re-sent every poll and the tip rose 1 wei per bump.
func TestNodeMinimumTipIsMet(t *testing.T) {
	t.Parallel()
	tb := pricedBundle(t)
	tb.r = tb.pricedRelayer(t, nil)
	tb.startClient(t, tb.r)
	to := freshAddress(t)

	first, _ := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), ChainID: simChainID, To: to, Value: big.NewInt(7)})
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, first.TxID, got.TxID)
	require.Equal(t, uint64(0), *got.Nonce)
	require.GreaterOrEqual(t, tb.minedTip(t, got).Int64(), int64(nodeMinimum))
	bs, err := tb.r.Broadcasts(context.Background(), got.TxID)
	require.NoError(t, err)
	require.Len(t, bs, 2, "the refused bytes, then one re-signed at the node's minimum")
	require.False(t, bs[0].Sent)
	require.Equal(t, bs[0].Nonce, bs[1].Nonce, "re-signed at the same nonce")
	require.Equal(t, int64(nodeMinimum), bs[1].MaxPriorityFee.Int64())

	tb.queue(t, relayer.Request{ExternalID: ext(t, 2), ChainID: simChainID, To: to, Value: big.NewInt(8)})
	got = tb.waitFinal(t, ext(t, 2))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, uint64(1), *got.Nonce)
	bs, err = tb.r.Broadcasts(context.Background(), got.TxID)
	require.NoError(t, err)
	require.Len(t, bs, 1, "the next send starts at the learned minimum")
	require.GreaterOrEqual(t, bs[0].MaxPriorityFee.Int64(), int64(nodeMinimum))
	require.Equal(t, int64(15), tb.balance(t, to).Int64(), "each send paid once")
}

// A burst goes out in one batch at the suggested tip and every element is
// refused; each send is re-signed at its own nonce and confirms once.
func TestNodeMinimumTipIsMetForEachSendOfABatch(t *testing.T) {
	t.Parallel()
	tb := pricedBundle(t)
	tb.r = tb.pricedRelayer(t, nil)
	tb.startClient(t, tb.r)
	to := freshAddress(t)
	ctx := context.Background()
	const n = 6
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		for i := range n {
			if _, _, err := tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: ext(t, i), Wallet: "ops", ChainID: simChainID,
				To: to, Value: big.NewInt(int64(i + 1))}); err != nil {
				return err
			}
		}
		return nil
	}))
	nonces := map[uint64]bool{}
	for i := range n {
		got := tb.waitFinal(t, ext(t, i))
		require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
		require.GreaterOrEqual(t, tb.minedTip(t, got).Int64(), int64(nodeMinimum))
		require.Equal(t, 1, tb.finalCalls(ext(t, i)))
		nonces[*got.Nonce] = true
	}
	require.Len(t, nonces, n)
	require.Equal(t, uint64(n), tb.nonce(t), "one transaction per send")
	require.Equal(t, int64(n*(n+1)/2), tb.balance(t, to).Int64(), "each send paid once")
}

// A wallet whose tip cap is below the node's minimum fails its send with
// the reason, nothing of it in any mempool, and gives its nonce back; its
// next send fails at once without taking a nonce; and once the cap is
// raised the same key's next send takes the freed nonce 0 and confirms.
func TestNodeMinimumAboveWalletCapFailsAndBlocksNothing(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	hexKey := hex.EncodeToString(crypto.FromECDSA(key))
	tb := pricedBundle(t, crypto.PubkeyToAddress(key.PublicKey))
	capped, err := relayer.WalletFromKey(hexKey)
	require.NoError(t, err)
	capped.MaxPriorityFee = big.NewInt(10)
	tb.r = tb.pricedRelayer(t, map[string]*relayer.Wallet{"capped": capped})
	ctx := context.Background()
	client := newClient(t, tb.pool, tb.r)
	require.NoError(t, client.Start(ctx))
	to := freshAddress(t)

	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), Wallet: "capped", ChainID: simChainID, To: to, Value: big.NewInt(1)})
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusFailed, got.Status)
	require.Contains(t, got.Error, "the node requires a tip of at least 1000 wei; the wallet's max_priority_fee caps it at 10 wei")
	require.Contains(t, got.Error, "minimum needed 1000", "the node's own words are kept")
	require.False(t, got.Accepted)

	// The ops wallet, uncapped, is not held up by it.
	tb.queue(t, relayer.Request{ExternalID: ext(t, 2), ChainID: simChainID, To: to, Value: big.NewInt(2)})
	require.Equal(t, relayer.StatusConfirmed, tb.waitFinal(t, ext(t, 2)).Status)

	tb.queue(t, relayer.Request{ExternalID: ext(t, 3), Wallet: "capped", ChainID: simChainID, To: to, Value: big.NewInt(4)})
	got = tb.waitFinal(t, ext(t, 3))
	require.Equal(t, relayer.StatusFailed, got.Status)
	require.Contains(t, got.Error, "the wallet's max_priority_fee caps it at 10 wei")
	require.Contains(t, got.Error, "nothing sent")
	require.Nil(t, got.Nonce, "failed before taking a nonce")

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, client.Stop(stopCtx))
	raised, err := relayer.WalletFromKey(hexKey)
	require.NoError(t, err)
	raised.MaxPriorityFee = big.NewInt(2000)
	tb.r = tb.pricedRelayer(t, map[string]*relayer.Wallet{"capped": raised})
	tb.startClient(t, tb.r)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 4), Wallet: "capped", ChainID: simChainID, To: to, Value: big.NewInt(8)})
	got = tb.waitFinal(t, ext(t, 4))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, uint64(0), *got.Nonce, "the failed send's nonce was given back")
	require.Equal(t, int64(10), tb.balance(t, to).Int64(), "only the sends that confirmed paid")
}
