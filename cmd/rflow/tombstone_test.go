package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// Pruning never frees a trigger key: after `runs prune`, the same
// occurrence claimed again (an event range walked again, a manual key)
// starts nothing; pruning under the longest webhook ttl needs --force.
func TestPruneKeepsTriggerKeysTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`
name: tomb
workflows:
  - name: wf
    trigger: { manual: {} }
    steps:
      - { id: d, delay: 1s }
  - name: hook
    trigger: { webhook: { idempotency_key: "${{ body.id }}", ttl: 72h } }
    steps:
      - { id: d, delay: 1s }
`), 0o644))
	dbURL := storetest.URL(t)
	pool := openPool(t, dbURL)
	project, err := workflow.Load(config, workflow.LoadOptions{})
	require.NoError(t, err)
	_, err = store.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project})
	require.NoError(t, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, trigger, status, finished_at)
		VALUES (gen_random_uuid(), 'wf', 1, 'order-1', 'manual', '{}', 'completed', now() - interval '40 days'),
		       (gen_random_uuid(), 'wf', 1, '31337:0xabc:tx0', 'event', '{}', 'completed', now() - interval '40 days')`)
	require.NoError(t, err)

	_, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "prune", "-c", config, "--older-than", "2d")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "under the longest re-delivery window, 72h0m0s")
	require.Equal(t, 2, countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs`), "refused: nothing pruned")

	out, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "prune", "-c", config, "--older-than", "30d")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "pruned 2 run(s)")
	require.Equal(t, 2, countRows(t, pool, `SELECT count(*) FROM rflow.run_tombstones`))

	// The occurrences come again: nothing new.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := e.ClaimTx(ctx, tx, []store.Claim{{Workflow: "wf", TriggerKey: "31337:0xabc:tx0", TriggerKind: "event", Trigger: []byte(`{}`)}})
		require.Zero(t, n, "a re-walked occurrence whose run was pruned claims nothing")
		return err
	}))
	out, stderr, code = rflowCmd(t, "--database-url", dbURL, "run", "wf", "-c", config, "--key", "order-1")
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.Contains(out, "key order-1 of wf already had run") && strings.Contains(out, "nothing new started"), out)
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs`))

	_, stderr, code = rflowCmd(t, "--database-url", dbURL, "runs", "prune", "-c", config, "--older-than", "1h", "--force")
	require.Equal(t, 0, code, stderr)
}
