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

// TestPauseReasons: an operator's pause records its reason and time, a
// second pause keeps the first's, a resume clears them; the circuit breaker
// leaves a paused workflow alone and names an unknown one.
func TestPauseReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.DeployWorkflow(ctx, tx, "wf", "h1", []byte(`{}`))
		return err
	}))
	require.NoError(t, store.SetWorkflowPaused(ctx, pool, "wf", true))
	w, err := store.GetWorkflow(ctx, pool, "wf")
	require.NoError(t, err)
	require.True(t, w.Paused)
	require.NotNil(t, w.PausedAt)
	require.Equal(t, store.PausedByOperator, w.PausedReason)
	first := *w.PausedAt

	require.NoError(t, store.SetWorkflowPaused(ctx, pool, "wf", true))
	w, err = store.GetWorkflow(ctx, pool, "wf")
	require.NoError(t, err)
	require.Equal(t, first, *w.PausedAt, "pausing a paused workflow keeps since when")

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		trip, err := store.TripBreaker(ctx, tx, "wf", 1, time.Hour)
		require.Nil(t, trip, "already paused: no trip")
		return err
	}))
	require.NoError(t, store.SetWorkflowPaused(ctx, pool, "wf", false))
	w, err = store.GetWorkflow(ctx, pool, "wf")
	require.NoError(t, err)
	require.False(t, w.Paused)
	require.Nil(t, w.PausedAt)
	require.Empty(t, w.PausedReason)

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.TripBreaker(ctx, tx, "nope", 1, time.Hour)
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		10 * time.Minute: "10m", time.Hour: "1h", 90 * time.Minute: "1h30m", 45 * time.Second: "45s",
		90 * time.Second: "1m30s", 2*time.Hour + 5*time.Second: "2h0m5s",
	} {
		require.Equal(t, want, store.ShortDuration(d), d)
	}
}
