package relayer_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

func TestQueueTxConfirms(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	to := freshAddress(t)
	value, _ := new(big.Int).SetString("123456789012345678901", 10) // > 2^64: exactness matters
	before := tb.nonce(t)

	queued, created := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: value, Confirmations: 2})
	require.True(t, created)
	require.Equal(t, relayer.StatusPending, queued.Status)
	require.Equal(t, 0, value.Cmp(queued.Value))

	// Confirmations: 2 needs one block on top of the mined one.
	waitFor(t, "mined", func() bool {
		got, err := tb.r.Get(context.Background(), ext(t, 1))
		return err == nil && got.Status == relayer.StatusMined
	})
	tb.node.Mine(1)
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
	require.Equal(t, queued.TxID, got.TxID)
	require.NotNil(t, got.Nonce)
	require.Equal(t, before, *got.Nonce)
	require.NotZero(t, got.BlockNumber)
	require.Equal(t, uint64(21000), got.GasUsed)
	require.Equal(t, uint64(1), *got.ReceiptStatus)
	require.Equal(t, 0, value.Cmp(tb.balance(t, to)))
	require.Equal(t, before+1, tb.nonce(t))
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))

	byID, err := tb.r.GetByTxID(context.Background(), queued.TxID)
	require.NoError(t, err)
	require.Equal(t, got, byID)
	_, err = tb.r.GetByTxID(context.Background(), uuid.New())
	require.ErrorIs(t, err, relayer.ErrNotFound)

	rc, err := tb.eth.TransactionReceipt(context.Background(), got.Hash)
	require.NoError(t, err)
	require.Equal(t, got.BlockNumber, rc.BlockNumber.Uint64())
}

func TestQueueTxDuplicateSendsOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	to := freshAddress(t)
	before := tb.nonce(t)

	first, created := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(1000)})
	require.True(t, created)
	// Same key, different body: the first send wins, nothing new is queued.
	second, created := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(5000)})
	require.False(t, created)
	require.Equal(t, first.TxID, second.TxID)
	require.Equal(t, int64(1000), second.Value.Int64())

	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusConfirmed, got.Status)
	third, created := tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(1000)})
	require.False(t, created)
	require.Equal(t, relayer.StatusConfirmed, third.Status)

	require.Equal(t, int64(1000), tb.balance(t, to).Int64())
	require.Equal(t, before+1, tb.nonce(t))
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))
}

func TestQueueTxRollbackQueuesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	tx, err := tb.pool.Begin(ctx)
	require.NoError(t, err)
	_, created, err := tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: ext(t, 1), Wallet: "ops", ChainID: chainID,
		To: freshAddress(t), Value: big.NewInt(1)})
	require.NoError(t, err)
	require.True(t, created)
	require.NoError(t, tx.Rollback(ctx))

	_, err = tb.r.Get(ctx, ext(t, 1))
	require.ErrorIs(t, err, relayer.ErrNotFound)
	var jobs int
	require.NoError(t, tb.pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job`).Scan(&jobs))
	require.Zero(t, jobs)
}

func TestQueueTxRejectsUnknownWalletAndNetwork(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	tx, err := tb.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, _, err = tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: "a", Wallet: "nope", ChainID: chainID})
	require.ErrorContains(t, err, `unknown wallet "nope"`)
	_, _, err = tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: "a", Wallet: "ops", ChainID: 5})
	require.ErrorContains(t, err, "no network for chain 5")
	_, _, err = tb.r.QueueTx(ctx, tx, relayer.Request{Wallet: "ops", ChainID: chainID})
	require.ErrorContains(t, err, "ExternalID is required")
}

func TestRevertFailsWithReasonAndSendsNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	em := anviltest.DeployEmitter(t, tb.node)
	data, err := em.ABI.Pack("refund", freshAddress(t), big.NewInt(5000))
	require.NoError(t, err)
	before := tb.nonce(t)

	sim, err := tb.r.Simulate(context.Background(), relayer.Request{Wallet: "ops", ChainID: chainID, To: em.Address, Data: data})
	require.NoError(t, err)
	require.True(t, sim.Reverted)
	require.Equal(t, "insufficient assets", sim.RevertReason)

	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: em.Address, Data: data})
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusFailed, got.Status)
	require.Equal(t, "execution reverted: insufficient assets", got.Error)
	require.Nil(t, got.Nonce)
	require.NotNil(t, got.Simulation)
	require.Equal(t, "insufficient assets", got.Simulation.RevertReason)
	require.Equal(t, before, tb.nonce(t))
	bs, err := tb.r.Broadcasts(context.Background(), got.TxID)
	require.NoError(t, err)
	require.Empty(t, bs)
	require.Equal(t, 1, tb.finalCalls(ext(t, 1)))

	// A call within the limit goes through.
	ok, err := em.ABI.Pack("refund", freshAddress(t), big.NewInt(10))
	require.NoError(t, err)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 2), To: em.Address, Data: ok})
	require.Equal(t, relayer.StatusConfirmed, tb.waitFinal(t, ext(t, 2)).Status)
	require.Equal(t, before+1, tb.nonce(t))
}

func TestDryRunSimulatesOnly(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	to := freshAddress(t)
	before := tb.nonce(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: to, Value: big.NewInt(7), DryRun: true})
	got := tb.waitFinal(t, ext(t, 1))
	require.Equal(t, relayer.StatusSimulated, got.Status)
	require.True(t, got.DryRun)
	require.NotNil(t, got.Simulation)
	require.Equal(t, uint64(21000), got.Simulation.GasEstimate)
	require.False(t, got.Simulation.Reverted)
	require.Nil(t, got.Nonce)
	require.Equal(t, before, tb.nonce(t))
	require.Zero(t, tb.balance(t, to).Sign())
}

func TestCancelOrDeadlineBeforeBroadcastSendsNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	before := tb.nonce(t)
	tb.queue(t, relayer.Request{ExternalID: ext(t, 1), To: freshAddress(t), Value: big.NewInt(1)})
	tb.queue(t, relayer.Request{ExternalID: ext(t, 2), To: freshAddress(t), Value: big.NewInt(1), Deadline: time.Now().Add(-time.Second)})
	ok, err := tb.r.Cancel(ctx, ext(t, 1))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = tb.r.Cancel(ctx, "rflow:unknown")
	require.NoError(t, err)
	require.False(t, ok)

	tb.startClient(t, tb.r)
	cancelled, expired := tb.waitFinal(t, ext(t, 1)), tb.waitFinal(t, ext(t, 2))
	require.Equal(t, relayer.StatusCancelled, cancelled.Status)
	require.Equal(t, relayer.StatusExpired, expired.Status)
	for _, got := range []*relayer.Transaction{cancelled, expired} {
		require.Nil(t, got.Nonce)
		bs, err := tb.r.Broadcasts(ctx, got.TxID)
		require.NoError(t, err)
		require.Empty(t, bs)
	}
	require.Equal(t, before, tb.nonce(t))
}
