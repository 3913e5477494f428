package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestNamespaceNames pins the stored shape: the home project's names are
// bare, another project's are "<project>.<workflow>", each namespace owns
// only its own, and queues never collide.
func TestNamespaceNames(t *testing.T) {
	t.Parallel()
	home := store.HomeNamespace("vault-ops")
	require.True(t, home.Home())
	require.Equal(t, "refund", home.Qualify("refund"))
	require.Equal(t, river.QueueDefault, home.Queue())
	require.True(t, home.Owns("refund"))
	require.False(t, home.Owns("audit.refund"))
	require.False(t, home.Owns("replay_s1__refund"))

	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := store.RegisterProject(ctx, pool, "vault-ops")
	require.NoError(t, err)
	audit, err := store.RegisterProject(ctx, pool, "audit")
	require.NoError(t, err)
	require.False(t, audit.Home())
	require.Equal(t, "audit.refund", audit.Qualify("refund"))
	local, ok := audit.Local("audit.refund")
	require.True(t, ok)
	require.Equal(t, "refund", local)
	require.False(t, audit.Owns("refund"))
	require.False(t, audit.Owns("auditx.refund"))
	require.Equal(t, "project_audit", audit.Queue())
	require.Equal(t, audit.Queue(), store.QueueOf("audit.refund"))
	require.Equal(t, river.QueueDefault, store.QueueOf("refund"))

	// Names River would refuse, or that fold to one spelling, get queues
	// of their own, each a valid River queue name.
	seen := map[string]string{}
	for _, p := range []string{"Ops", "ops", "OPS", "a_b", "a-b", "a__b", "a--b", "x-", "x_"} {
		q := store.ProjectQueue(p)
		require.Regexp(t, `^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`, q, p)
		require.NotContains(t, seen, q, "%s and %s share a queue", p, seen[q])
		seen[q] = p
	}
	require.Error(t, store.ValidProjectName("a__b"), "a stored name a__b.W would read as a rehearsal's")
}

// TestRegisterProjectHomeIsRaceSafe registers many projects at once on a
// fresh database: exactly one becomes the home project, and registering
// again returns the same namespace.
func TestRegisterProjectHomeIsRaceSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	names := []string{"p1", "p2", "p3", "p4", "p5", "p6"}
	got := make([]store.Namespace, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, err := store.RegisterProject(ctx, pool, n)
			require.NoError(t, err)
			got[i] = ns
		}()
	}
	wg.Wait()
	homes := 0
	for i, ns := range got {
		if ns.Home() {
			homes++
		}
		again, err := store.RegisterProject(ctx, pool, names[i])
		require.NoError(t, err)
		require.Equal(t, ns, again)
	}
	require.Equal(t, 1, homes)

	// A read looks a project up without registering it.
	ns, err := store.LookupNamespace(ctx, pool, "newcomer")
	require.NoError(t, err)
	require.False(t, ns.Home())
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.projects WHERE name = 'newcomer'`).Scan(&n))
	require.Zero(t, n)

	// An unnamed project cannot share a database that has a home project.
	_, err = store.RegisterProject(ctx, pool, "")
	require.ErrorContains(t, err, "give rflow.yaml a name:")
}

// TestUpgradeSeedsTheHomeProject replays migration 039 over a database an
// earlier version left: bare workflows of project legacy and its trigger
// leases. legacy becomes the home project, so another project starting
// first registers apart and its listings do not see legacy's workflows.
func TestUpgradeSeedsTheHomeProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `
		DROP TABLE rflow.projects;
		DELETE FROM rflow.schema_migrations WHERE version = 39;
		INSERT INTO rflow.workflows (name, generation, spec_hash, spec) VALUES ('refund', 1, 'h', '{}');
		INSERT INTO rflow.leases (name, owner, expires_at) VALUES ('legacy/head/31337', NULL, '-infinity'),
			('legacy/event/refund', NULL, '-infinity')`)
	require.NoError(t, err)
	_, err = store.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	home, ok, err := store.HomeProject(ctx, pool)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "legacy", home)

	other, err := store.RegisterProject(ctx, pool, "newcomer")
	require.NoError(t, err)
	require.False(t, other.Home())
	wfs, err := store.ListWorkflows(ctx, pool, other)
	require.NoError(t, err)
	require.Empty(t, wfs)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		retired, err := store.RetireWorkflows(ctx, tx, other, nil)
		require.Empty(t, retired)
		return err
	})
	require.NoError(t, err)
	legacy, err := store.RegisterProject(ctx, pool, "legacy")
	require.NoError(t, err)
	require.True(t, legacy.Home())
	wfs, err = store.ListWorkflows(ctx, pool, legacy)
	require.NoError(t, err)
	require.Len(t, wfs, 1)
	require.Nil(t, wfs[0].RetiredAt)
}

// TestRegisterWithoutSeedKeepsOthersBareWorkflows covers an upgrade the
// migration could not attribute (no lease, no live process): a project
// starting first still does not adopt bare workflows when the database
// shows another project's trace at that moment.
func TestRegisterWithoutSeedKeepsOthersBareWorkflows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO rflow.workflows (name, generation, spec_hash, spec) VALUES ('refund', 1, 'h', '{}');
		INSERT INTO rflow.leases (name, owner, expires_at) VALUES ('legacy/node/x', NULL, '-infinity')`)
	require.NoError(t, err)
	ns, err := store.RegisterProject(ctx, pool, "newcomer")
	require.NoError(t, err)
	require.False(t, ns.Home())
	_, ok, err := store.HomeProject(ctx, pool)
	require.NoError(t, err)
	require.False(t, ok, "nobody adopted the bare workflows")
	legacy, err := store.RegisterProject(ctx, pool, "legacy")
	require.NoError(t, err)
	require.True(t, legacy.Home())
}
