package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestLeasesSplitRenewTakeOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	names := []string{"t/a", "t/b", "t/c", "t/d"}

	a, err := store.AcquireLeases(ctx, pool, "A", names, time.Minute, 2)
	require.NoError(t, err)
	require.Len(t, a, 2)
	b, err := store.AcquireLeases(ctx, pool, "B", names, time.Minute, 0)
	require.NoError(t, err)
	require.Len(t, b, 2, "B gets only the leases A does not hold")
	again, err := store.AcquireLeases(ctx, pool, "A", names, time.Minute, 0)
	require.NoError(t, err)
	require.Empty(t, again, "live leases are not handed out twice")

	live, err := store.LiveLeases(ctx, pool, "t/")
	require.NoError(t, err)
	require.Equal(t, 4, live)

	// A's lease expires (simulated by a short TTL); B takes it over with a new token.
	short, err := store.RenewLease(ctx, pool, a[0], time.Millisecond)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	taken, err := store.AcquireLeases(ctx, pool, "B", []string{short.Name}, time.Minute, 0)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	require.Greater(t, taken[0].Token, short.Token)

	_, err = store.RenewLease(ctx, pool, short, time.Minute)
	require.ErrorIs(t, err, store.ErrLeaseLost, "the old holder cannot renew a lease taken over")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.FenceLease(ctx, tx, short) })
	require.ErrorIs(t, err, store.ErrLeaseLost, "the old holder's fenced writes are refused")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.FenceLease(ctx, tx, taken[0]) }))

	// Release hands a lease over at once.
	require.NoError(t, store.ReleaseLease(ctx, pool, a[1]))
	got, err := store.AcquireLeases(ctx, pool, "C", names, time.Minute, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, a[1].Name, got[0].Name)
}
