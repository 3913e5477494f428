package store_test

import (
	"context"
	"testing"

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
