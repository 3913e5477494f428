package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestTakeWindowSlotRacersNeverExceedMax(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ctx := context.Background()
	const max, racers = 7, 40
	var took atomic.Int64
	var end time.Time
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, e, err := store.TakeWindowSlot(ctx, pool, "w", store.GuardRateLimit, max, 24*time.Hour)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				took.Add(1)
			}
			mu.Lock()
			end = e
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.EqualValues(t, max, took.Load())
	require.True(t, end.After(time.Now()) && end.Sub(time.Now()) <= 24*time.Hour, "window end %s", end)
	// Another guard and another workflow have windows of their own.
	ok, _, err := store.TakeWindowSlot(ctx, pool, "w", store.GuardThrottle, max, 24*time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _, err = store.TakeWindowSlot(ctx, pool, "other", store.GuardRateLimit, 1, 24*time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
}
