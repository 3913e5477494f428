package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// A process that works steps gets a pool sized for its workers, unless
// the URL says otherwise; other commands keep pgx's default.
func TestConnectPoolSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.URL(t)
	capped := url + " pool_max_conns=3" // keyword/value form
	switch {
	case strings.Contains(url, "?"):
		capped = url + "&pool_max_conns=3"
	case strings.Contains(url, "://"):
		capped = url + "?pool_max_conns=3"
	}
	for _, tc := range []struct {
		url     string
		workers int
		want    int32
	}{
		{url, 50, 20},
		{url, 200, 58},
		{capped, 50, 3},
	} {
		pool, err := connect(ctx, tc.url, tc.workers)
		require.NoError(t, err)
		require.Equal(t, tc.want, pool.Config().MaxConns, "%s with %d workers", tc.url, tc.workers)
		pool.Close()
	}
	pool, err := connect(ctx, url, 0)
	require.NoError(t, err)
	defer pool.Close()
	require.Less(t, pool.Config().MaxConns, int32(20), "commands without workers keep pgx's default")
}
