package relayer_test

import (
	"context"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// A send queued from one key is never signed by another: when the key
// behind its wallet name changed before its first broadcast (rflow dev's
// wallet is fresh each session), it fails, saying so, and nothing is sent
// from the new account.
func TestKeyChangedBeforeBroadcastSendsNothingFromTheNewKey(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	to := freshAddress(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5)})

	tb.keyIdx = 2 // "ops" is now another key
	r := tb.newRelayer(t, relayer.Config{})
	tb.startClient(t, r)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusFailed, got.Status, got.Error)
	require.Contains(t, got.Error, "the wallet's key changed")
	require.Zero(t, tb.balance(t, to).Sign(), "the send went out from the new key")
	require.Zero(t, tb.nonce(t), "the new key sent something")
}

// A send in the mempool from one key, whose wallet name now has another
// key, is not bumped (nor healed, nor settled) with the new key: that
// would be a second transaction from another account while the old key's
// bytes may still be mined (they are, once a process with that key is
// back), so one send would pay twice.
func TestKeyChangedInFlightIsNotSignedByTheNewKey(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{NoMining: true}, noClient: true})
	ctx := context.Background()
	to := freshAddress(t)
	run := func(r *relayer.Relayer) func() {
		c := newClient(t, tb.pool, r)
		require.NoError(t, c.Start(ctx))
		return func() {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, c.Stop(stopCtx))
		}
	}
	stop := run(tb.r)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5)})
	waitFor(t, "send in the mempool", func() bool {
		got, err := tb.r.Get(ctx, ext(t, 1))
		return err == nil && got.Status == relayer.StatusInMempool && got.Nonce != nil && *got.Nonce == 0
	})
	stop()

	// "ops" is now key 2; a stuck send would be bumped at once.
	tb.keyIdx = 2
	logs := &logLines{}
	r2 := tb.newRelayer(t, relayer.Config{BumpAfter: 50 * time.Millisecond, Logger: slog.New(logs)})
	key2 := tb.wallet.Address()
	stop = run(r2)
	time.Sleep(time.Second) // many polls
	stop()
	require.Equal(t, 1, logs.count("relayer step will be retried"), "the key change is logged once, not at every poll")
	got, err := tb.r.Get(ctx, ext(t, 1))
	require.NoError(t, err)
	require.Equal(t, relayer.StatusInMempool, got.Status, "a send of another key was settled: %+v", got)
	require.Equal(t, uint64(0), *got.Nonce)
	pending, err := tb.eth.PendingNonceAt(ctx, key2)
	require.NoError(t, err)
	require.Zero(t, pending, "the new key sent the send")
	bs, err := tb.r.Broadcasts(ctx, got.TxID)
	require.NoError(t, err)
	require.Len(t, bs, 1, "the send was signed again")

	// The old key is back: its bytes are mined, and the send confirmed.
	tb.keyIdx = 1
	stop = run(tb.newRelayer(t, relayer.Config{}))
	defer stop()
	tb.node.Mine(1)
	got = tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, bs[0].Hash, got.Hash)
	require.Equal(t, int64(5), tb.balance(t, to).Int64(), "the send paid other than once")
	used, err := tb.eth.NonceAt(ctx, key2, nil)
	require.NoError(t, err)
	require.Zero(t, used, "the new key sent something")
}
