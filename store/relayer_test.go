package store_test

import (
	"context"
	"errors"
	"fmt"
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

func TestAssignNonceIsGaplessUnderConcurrency(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	gas := store.RelayerTxGas{GasLimit: 21000, MaxFee: big.NewInt(10), MaxPriorityFee: big.NewInt(1)}
	queue := func(i int) *store.RelayerTx {
		row, _, err := store.QueueRelayerTx(ctx, pool, newRelayerTx(fmt.Sprint("k", i), big.NewInt(1)))
		require.NoError(t, err)
		require.NoError(t, store.SetRelayerTxJob(ctx, pool, row.TxID, int64(100+i)))
		return row
	}
	const sends = 20
	rows := make([]*store.RelayerTx, sends)
	for i := range sends {
		rows[i] = queue(i)
	}
	var mu sync.Mutex
	var got []int64
	var errs []error
	var wg sync.WaitGroup
	for i, row := range rows {
		wg.Go(func() {
			out, err := store.AssignNonce(ctx, pool, row.TxID, int64(100+i), nil, 3, gas, big.NewInt(50))
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			if out != nil {
				got = append(got, *out.Nonce)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	require.Len(t, got, sends)
	for i, n := range got {
		require.Equal(t, int64(3+i), n, "nonces %v", got)
	}

	// Assigned once: a second assignment (or one by a stale job) hands out nothing.
	again, err := store.AssignNonce(ctx, pool, rows[0].TxID, 100, nil, 3, gas, nil)
	require.NoError(t, err)
	require.Nil(t, again)
	stale, err := store.AssignNonce(ctx, pool, rows[1].TxID, 999, nil, 3, gas, nil)
	require.NoError(t, err)
	require.Nil(t, stale)

	// The chain moved ahead (the key was used elsewhere): assignment follows it.
	row := queue(sends)
	out, err := store.AssignNonce(ctx, pool, row.TxID, int64(100+sends), nil, 40, gas, nil)
	require.NoError(t, err)
	require.Equal(t, int64(40), *out.Nonce)
	require.Equal(t, int64(10), out.MaxFee.Int64())
	require.Equal(t, store.RelayerPending, out.Status)

	// Healing: the send's nonce 40 was used by someone else; it moves to 41.
	healed, err := store.AssignNonce(ctx, pool, row.TxID, int64(100+sends), out.Nonce, 0, gas, nil)
	require.NoError(t, err)
	require.Equal(t, int64(41), *healed.Nonce)
	wrong := int64(40)
	none, err := store.AssignNonce(ctx, pool, row.TxID, int64(100+sends), &wrong, 0, gas, nil)
	require.NoError(t, err)
	require.Nil(t, none, "only the nonce the send holds can be replaced")

	// A rolled-back assignment hands out nothing.
	next := queue(sends + 1)
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.AssignNonce(ctx, tx, next.TxID, int64(101+sends), nil, 0, gas, nil)
		require.NoError(t, err)
		return pgx.ErrTxClosed
	})
	out, err = store.AssignNonce(ctx, pool, next.TxID, int64(101+sends), nil, 0, gas, nil)
	require.NoError(t, err)
	require.Equal(t, int64(42), *out.Nonce)
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
	checked, err := store.CheckRelayerTx(ctx, pool, row.TxID, 8)
	require.NoError(t, err)
	require.Nil(t, checked, "job 8 does not drive the send")
	checked, err = store.CheckRelayerTx(ctx, pool, row.TxID, 7)
	require.NoError(t, err)
	require.Equal(t, row.TxID, checked.TxID)

	finish := func(job int64, status string) *store.RelayerTx {
		var out *store.RelayerTx
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			moved, err := store.FinishRelayerTxs(ctx, tx, []store.RelayerFinish{{TxID: row.TxID, JobID: job,
				Final: store.RelayerFinal{Status: status, Error: "x"}}})
			if len(moved) == 1 {
				out = moved[0]
			}
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

	got, err := store.CheckRelayerTx(ctx, pool, row.TxID, 7)
	require.NoError(t, err)
	require.Nil(t, got, "a final send has nothing left to do")
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
	other, _, err := store.QueueRelayerTx(ctx, pool, newRelayerTx("k2", big.NewInt(5)))
	require.NoError(t, err)
	err = store.RecordBroadcast(ctx, pool, store.RelayerBroadcast{Hash: "0x01", TxID: other.TxID, Kind: "send", Nonce: 4, Gas: gas, Raw: []byte{1}})
	require.ErrorContains(t, err, "belongs to relayer tx "+row.TxID.String())
	require.NoError(t, store.SetRelayerTxJob(ctx, pool, row.TxID, 1))
	require.NoError(t, store.MarkBroadcastSent(ctx, pool, row.TxID, 1, "0x02"))
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

// An orphaned receipt is kept before the send moves on, only by the job
// driving a mined send, and once.
func TestOrphanRelayerReceiptIsFencedAndJournaled(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	row, _, err := store.QueueRelayerTx(ctx, pool, newRelayerTx("orphan", big.NewInt(1)))
	require.NoError(t, err)
	require.NoError(t, store.SetRelayerTxJob(ctx, pool, row.TxID, 7))
	old := store.RelayerReceipt{Hash: "0xaa", Block: 5, BlockHash: "0xb5", Status: 1, GasUsed: 21000}
	require.NoError(t, store.SetRelayerTxMined(ctx, pool, row.TxID, 7, old))

	moved, err := store.OrphanRelayerReceipt(ctx, pool, row.TxID, 8, nil)
	require.NoError(t, err)
	require.False(t, moved, "a stale job changes nothing")

	next := store.RelayerReceipt{Hash: "0xaa", Block: 6, BlockHash: "0xb6", Status: 1, GasUsed: 21000}
	moved, err = store.OrphanRelayerReceipt(ctx, pool, row.TxID, 7, &next)
	require.NoError(t, err)
	require.True(t, moved)
	got, err := store.RelayerTxByID(ctx, pool, row.TxID)
	require.NoError(t, err)
	require.Equal(t, store.RelayerMined, got.Status)
	require.Equal(t, int64(6), *got.MinedBlock)
	require.Equal(t, "0xb6", *got.MinedBlockHash)
	require.NotNil(t, got.OrphanedAt)

	moved, err = store.OrphanRelayerReceipt(ctx, pool, row.TxID, 7, nil)
	require.NoError(t, err)
	require.True(t, moved)
	got, err = store.RelayerTxByID(ctx, pool, row.TxID)
	require.NoError(t, err)
	require.Equal(t, store.RelayerInMempool, got.Status)
	require.Nil(t, got.MinedBlock)
	require.Nil(t, got.MinedBlockHash)
	require.Equal(t, "0xaa", *got.Hash)

	moved, err = store.OrphanRelayerReceipt(ctx, pool, row.TxID, 7, nil)
	require.NoError(t, err)
	require.False(t, moved, "no longer mined")
	orphans, err := store.RelayerOrphanedReceipts(ctx, pool, row.TxID)
	require.NoError(t, err)
	require.Len(t, orphans, 2)
	require.Equal(t, []int64{5, 6}, []int64{orphans[0].Block, orphans[1].Block})
	require.Equal(t, []string{"0xb5", "0xb6"}, []string{orphans[0].BlockHash, orphans[1].BlockHash})
}

// AssignNonces numbers the sends that qualify in the order asked, from the
// chain's pending nonce or the stored next one, whichever is higher, and
// hands out nothing for the rest: a cancelled send, one another job drives,
// and a send from another wallet all keep no nonce and take none.
func TestAssignNoncesNumbersOnlyQualifyingSendsInOrder(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	gas := store.RelayerTxGas{GasLimit: 21000, MaxFee: big.NewInt(10), MaxPriorityFee: big.NewInt(1)}
	var asks []store.NonceAsk
	for i := range 6 {
		n := newRelayerTx(fmt.Sprint("batch", i), big.NewInt(1))
		if i == 5 {
			n.From = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
		}
		row, _, err := store.QueueRelayerTx(ctx, pool, n)
		require.NoError(t, err)
		require.NoError(t, store.SetRelayerTxJob(ctx, pool, row.TxID, int64(200+i)))
		asks = append(asks, store.NonceAsk{TxID: row.TxID, JobID: int64(200 + i), Gas: gas, FeeCap: big.NewInt(50)})
	}
	_, marked, err := store.RequestRelayerTxCancel(ctx, pool, "batch1")
	require.NoError(t, err)
	require.True(t, marked)
	asks[2].JobID = 999 // not this job's send

	// Reversed: nonces follow the order asked, not the order queued.
	first := []store.NonceAsk{asks[4], asks[3], asks[2], asks[1], asks[0]}
	got, err := store.AssignNonces(ctx, pool, 7, first)
	require.NoError(t, err)
	var keys []string
	var nonces []int64
	for _, row := range got {
		keys, nonces = append(keys, row.ExternalID), append(nonces, *row.Nonce)
		require.Equal(t, int64(21000), *row.GasLimit)
		require.Equal(t, "50", row.FeeCap.String())
	}
	require.Equal(t, []string{"batch4", "batch3", "batch0"}, keys)
	require.Equal(t, []int64{7, 8, 9}, nonces)

	// A mixed batch (two wallets) is refused whole.
	got, err = store.AssignNonces(ctx, pool, 0, []store.NonceAsk{asks[5], {TxID: asks[2].TxID, JobID: 202, Gas: gas}})
	require.NoError(t, err)
	require.Empty(t, got)

	// The stored next nonce stands above a lower pending one, and nothing
	// was taken for the sends refused.
	got, err = store.AssignNonces(ctx, pool, 0, []store.NonceAsk{{TxID: asks[2].TxID, JobID: 202, Gas: gas}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(10), *got[0].Nonce)
	row, err := store.RelayerTxByExternalID(ctx, pool, "batch1")
	require.NoError(t, err)
	require.Nil(t, row.Nonce, "a cancelled send never gets a nonce")
}
