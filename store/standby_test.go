package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// LiveNodes counts a registered node while its liveness lock is held, and
// not after its connection dropped (a killed process).
func TestLiveNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	n, err := store.LiveNodes(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, n)
	a, err := store.RegisterNode(ctx, url, "a")
	require.NoError(t, err)
	b, err := store.RegisterNode(ctx, url, "b")
	require.NoError(t, err)
	n, err = store.LiveNodes(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	a.Drop()
	require.Eventually(t, func() bool {
		n, err = store.LiveNodes(ctx, pool)
		return err == nil && n == 1
	}, 5*time.Second, 20*time.Millisecond, "a dropped node still counts as live")
	require.NoError(t, b.Close(ctx))
	n, err = store.LiveNodes(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, n)
}
