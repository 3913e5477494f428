package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// RecordNodeHead writes only under the live head lease, and learns the
// chain's block time from the node's block timestamps as the head advances.
func TestRecordNodeHeadFencedAndBlockTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	ls, err := store.AcquireLeases(ctx, pool, "p1", []string{"proj/head/5"}, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	lease := ls[0]
	t0 := time.Unix(1_700_000_000, 0)
	record := func(l store.Lease, n int64, at time.Time) error {
		return store.RecordNodeHead(ctx, pool, l, store.NodeHead{ChainID: 5, Network: "five", Number: n, Time: at})
	}
	head := func() store.HeadProgress {
		t.Helper()
		hs, err := store.HeadProgresses(ctx, pool)
		require.NoError(t, err)
		require.Len(t, hs, 1)
		return hs[0]
	}
	require.NoError(t, record(lease, 10, t0))
	require.Zero(t, head().BlockTime, "one sample is no interval")
	require.NoError(t, record(lease, 14, t0.Add(48*time.Second)))
	require.Equal(t, 12*time.Second, head().BlockTime, "4 blocks in 48 s")
	require.NoError(t, record(lease, 14, t0.Add(48*time.Second)), "the same head again changes nothing")
	require.Equal(t, 12*time.Second, head().BlockTime)
	require.NoError(t, record(lease, 15, t0.Add(50*time.Second)))
	require.InDelta(t, 10*time.Second, head().BlockTime, float64(time.Millisecond), "0.8 × 12 s + 0.2 × 2 s")
	h := head()
	require.Equal(t, "five", h.Network)
	require.Equal(t, int64(15), h.NodeHead)
	require.Equal(t, int64(-1), h.Window, "no window yet")
	require.Equal(t, "p1", h.Holder)
	require.True(t, h.LeaseLive)

	var network, owner string
	var nodeHead int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT network, node_head, lease_owner FROM rflow.chain_heads WHERE chain_id = 5`).
		Scan(&network, &nodeHead, &owner))
	require.Equal(t, "five", network)
	require.Equal(t, int64(15), nodeHead)
	require.Equal(t, "p1", owner)

	stale := lease
	stale.Token--
	require.ErrorIs(t, record(stale, 99, t0.Add(time.Hour)), store.ErrLeaseLost)
	require.Equal(t, int64(15), head().NodeHead, "a stale holder wrote nothing")
}
