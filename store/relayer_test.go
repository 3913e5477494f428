package store_test

import (
	"context"
	"errors"
	"math/big"
	"sort"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func newRelayerTx(externalID string, value *big.Int) store.NewRelayerTx {
	return store.NewRelayerTx{TxID: uuid.Must(uuid.NewV7()), ExternalID: externalID, Wallet: "ops", ChainID: 31337,
		From: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", To: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
		Value: value, Data: []byte{1, 2}, Confirmations: 2}
}

func TestQueueRelayerTxIsIdempotentAndExact(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	maxUint256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

	first, created, err := store.QueueRelayerTx(ctx, pool, newRelayerTx("k1", maxUint256))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 0, maxUint256.Cmp(first.Value))
	require.Equal(t, store.RelayerPending, first.Status)
	require.Equal(t, []byte{1, 2}, first.Data)
	require.Nil(t, first.Nonce)

	again, created, err := store.QueueRelayerTx(ctx, pool, newRelayerTx("k1", big.NewInt(1)))
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first.TxID, again.TxID)
	require.Equal(t, 0, maxUint256.Cmp(again.Value))

	byID, err := store.RelayerTxByID(ctx, pool, first.TxID)
	require.NoError(t, err)
	require.Equal(t, "k1", byID.ExternalID)
	_, err = store.RelayerTxByExternalID(ctx, pool, "missing")
	require.ErrorIs(t, err, store.ErrRelayerTxNotFound)

	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestReserveNonceIsGaplessUnderConcurrency(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	const workers = 20
	var mu sync.Mutex
	var got []int64
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				n, err := store.ReserveNonce(ctx, tx, "0xabc", 1, 3)
				if err != nil {
					return err
				}
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
				return nil
			})
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	for i, n := range got {
		require.Equal(t, int64(3+i), n, "nonces %v", got)
	}

	// The chain moved ahead (the key was used elsewhere): reservation follows it.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := store.ReserveNonce(ctx, tx, "0xabc", 1, 40)
		require.Equal(t, int64(40), n)
		return err
	})
	require.NoError(t, err)
	// A rolled-back reservation hands out nothing.
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.ReserveNonce(ctx, tx, "0xabc", 1, 0)
		require.NoError(t, err)
		return pgx.ErrTxClosed
	})
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := store.ReserveNonce(ctx, tx, "0xabc", 1, 0)
		require.Equal(t, int64(41), n)
		return err
	})
	require.NoError(t, err)
}

func TestReconcileNonceNeverLowers(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	n, err := store.ReconcileNonce(ctx, pool, "0xdef", 1, 7)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	n, err = store.ReconcileNonce(ctx, pool, "0xdef", 1, 2)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	n, err = store.ReconcileNonce(ctx, pool, "0xdef", 1, 9)
	require.NoError(t, err)
	require.Equal(t, int64(9), n)
	// Per chain.
	n, err = store.ReconcileNonce(ctx, pool, "0xdef", 2, 0)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestFinishRelayerTxIsFencedOnTheJob(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	row, _, err := store.QueueRelayerTx(ctx, pool, newRelayerTx("k1", big.NewInt(5)))
	require.NoError(t, err)
	require.NoError(t, store.SetRelayerTxJob(ctx, pool, row.TxID, 7))

	finish := func(job int64, status string) *store.RelayerTx {
		var out *store.RelayerTx
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			out, err = store.FinishRelayerTx(ctx, tx, row.TxID, job, store.RelayerFinal{Status: status, Error: "x"})
			return err
		}))
		return out
	}
	require.Nil(t, finish(8, store.RelayerFailed), "a stale job changes nothing")
	done := finish(7, store.RelayerConfirmed)
	require.NotNil(t, done)
	require.Equal(t, store.RelayerConfirmed, done.Status)
	require.True(t, done.Final())
	require.NotNil(t, done.FinishedAt)
	require.Nil(t, finish(7, store.RelayerFailed), "a final send stays final")

	ok, err := store.TouchRelayerTx(ctx, pool, row.TxID, 8)
	require.NoError(t, err)
	require.False(t, ok)
}

func TestRecordBroadcastKeepsEveryHashOnce(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	row, _, err := store.QueueRelayerTx(ctx, pool, newRelayerTx("k1", big.NewInt(5)))
	require.NoError(t, err)
	gas := store.RelayerTxGas{GasLimit: 21000, MaxFee: big.NewInt(100), MaxPriorityFee: big.NewInt(2)}
	for _, h := range []string{"0x01", "0x02", "0x01"} {
		require.NoError(t, store.RecordBroadcast(ctx, pool, store.RelayerBroadcast{Hash: h, TxID: row.TxID, Kind: "send",
			Nonce: 4, Gas: gas, Raw: []byte(h)}))
	}
	require.NoError(t, store.MarkBroadcastSent(ctx, pool, row.TxID, "0x02"))
	bs, err := store.RelayerBroadcasts(ctx, pool, row.TxID)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, int64(100), bs[0].Gas.MaxFee.Int64())
	require.Nil(t, bs[0].Gas.GasPrice)
	sent := map[string]bool{}
	for _, b := range bs {
		sent[b.Hash] = b.SentAt != nil
	}
	require.Equal(t, map[string]bool{"0x01": false, "0x02": true}, sent)
	got, err := store.RelayerTxByID(ctx, pool, row.TxID)
	require.NoError(t, err)
	require.Equal(t, store.RelayerInMempool, got.Status)
	require.Equal(t, "0x02", *got.Hash)
}
