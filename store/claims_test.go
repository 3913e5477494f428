package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestClaimRunsGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 3)`)
	require.NoError(t, err)

	claim := func(claims ...store.Claim) []store.ClaimedRun {
		var out []store.ClaimedRun
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			out, err = store.ClaimRuns(ctx, tx, claims)
			return err
		}))
		return out
	}
	a := store.Claim{Workflow: "wf", TriggerKey: "1:0xabc:0", TriggerKind: "event", Trigger: []byte(`{"x":1}`), ChainID: 1, BlockNumber: 7}
	b := store.Claim{Workflow: "wf", TriggerKey: "1:0xabc:1", TriggerKind: "event"}
	unknown := store.Claim{Workflow: "nope", TriggerKey: "k", TriggerKind: "manual"}

	won := claim(a, unknown, b, a)
	require.Len(t, won, 2, "a duplicate inside one batch and an unknown workflow must not create runs")
	require.Equal(t, 0, won[0].Index)
	require.Equal(t, 2, won[1].Index)
	require.Equal(t, int64(3), won[0].Generation)

	require.Empty(t, claim(a, b), "replayed claims are no-ops")

	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&n))
	require.Equal(t, 2, n)
}

// A birth applies only to the generation it was planned from and never to
// a paused workflow: otherwise the run is born queued, as every run was,
// and ClaimedRun.Born says which.
func TestClaimRunsBornAppliesOnlyToItsGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 3)`)
	require.NoError(t, err)
	wake := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	birth := func(gen int64) store.Birth {
		return store.Birth{ID: uuid.Must(uuid.NewV7()), Generation: gen, Status: store.RunWaitingDelay, Position: "nap", WakeAt: &wake}
	}
	claim := func(key string, b store.Birth) store.ClaimedRun {
		var out []store.ClaimedRun
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			out, err = store.ClaimRunsBorn(ctx, tx, []store.Claim{store.ManualClaim("wf", key, nil)}, []store.Birth{b})
			return err
		}))
		require.Len(t, out, 1)
		require.Equal(t, b.ID, out[0].ID, "the run is the birth's")
		return out[0]
	}
	row := func(id uuid.UUID) (status string, position *string, at *time.Time) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, position, wake_at FROM rflow.workflow_runs WHERE id = $1`, id).
			Scan(&status, &position, &at))
		return status, position, at
	}

	born := claim("now", birth(3))
	require.True(t, born.Born)
	status, position, at := row(born.ID)
	require.Equal(t, "waiting_delay", status)
	require.Equal(t, "nap", *position)
	require.True(t, at.Equal(wake))

	for key, b := range map[string]store.Birth{"stale": birth(2), "newer": birth(4)} {
		r := claim(key, b)
		require.False(t, r.Born, key)
		status, position, at = row(r.ID)
		require.Equal(t, "queued", status, key)
		require.Nil(t, position, key)
		require.Nil(t, at, key)
	}

	_, err = pool.Exec(ctx, `UPDATE rflow.workflows SET paused = true WHERE name = 'wf'`)
	require.NoError(t, err)
	paused := claim("paused", birth(3))
	require.False(t, paused.Born)
	require.True(t, paused.Paused)
	status, _, _ = row(paused.ID)
	require.Equal(t, "queued", status)
}
