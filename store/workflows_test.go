package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestSyncNeverRollsBack: the start-up sync deploys only a new spec; a
// spec equal to a superseded generation is skipped and names it, while an
// explicit deploy of that spec is a new generation (generations only grow),
// after which the formerly newer file is the superseded one.
func TestSyncNeverRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	in := func(f func(tx pgx.Tx) (store.Deployed, error)) store.Deployed {
		t.Helper()
		var d store.Deployed
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			d, err = f(tx)
			return err
		}))
		return d
	}
	sync := func(hash string) store.Deployed {
		return in(func(tx pgx.Tx) (store.Deployed, error) {
			return store.SyncWorkflow(ctx, tx, "wf", hash, []byte(`{"v":"`+hash+`"}`))
		})
	}
	deploy := func(hash string) store.Deployed {
		return in(func(tx pgx.Tx) (store.Deployed, error) {
			return store.DeployWorkflow(ctx, tx, "wf", hash, []byte(`{"v":"`+hash+`"}`))
		})
	}
	current := func() string {
		w, err := store.GetWorkflow(ctx, pool, "wf")
		require.NoError(t, err)
		return w.SpecHash
	}

	require.Equal(t, store.Deployed{Name: "wf", Generation: 1, Changed: true}, sync("old"))
	require.Equal(t, store.Deployed{Name: "wf", Generation: 1}, sync("old"), "the current spec changes nothing")
	require.Equal(t, store.Deployed{Name: "wf", Generation: 2, Changed: true, Previous: 1}, sync("new"))

	// A process restarting with the old file: skipped, the newer stays.
	require.Equal(t, store.Deployed{Name: "wf", Generation: 2, Superseded: 1}, sync("old"))
	require.Equal(t, "new", current())

	// Rolling back on purpose: a new generation with the old spec.
	require.Equal(t, store.Deployed{Name: "wf", Generation: 3, Changed: true, Previous: 2, SameAs: 1}, deploy("old"))
	require.Equal(t, store.Deployed{Name: "wf", Generation: 3, Superseded: 2}, sync("new"), "the rolled-back spec is now the superseded one")
	require.Equal(t, store.Deployed{Name: "wf", Generation: 3}, sync("old"))
	require.Equal(t, "old", current())
	spec, fromAPI, err := store.WorkflowSpec(ctx, pool, "wf", 3)
	require.NoError(t, err)
	require.False(t, fromAPI)
	require.JSONEq(t, `{"v":"old"}`, string(spec))

	// A spec never deployed is still deployed by a start.
	require.Equal(t, store.Deployed{Name: "wf", Generation: 4, Changed: true, Previous: 3}, sync("newest"))
	gens, err := store.WorkflowGenerations(ctx, pool, store.Namespace{})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"wf": 4}, gens)
}
