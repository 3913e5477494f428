package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

const generations = `
name: t
workflows:
  - name: gen
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 1s }
      - { id: after, http_call: { url: "{{URL}}/v1" } }
`

// TestRedeployKeepsRunsOnTheirGeneration: a deploy bumps the generation, a
// run in flight finishes on the definition it was claimed under, and a step
// job carrying a generation or attempt that no longer holds is a counted
// no-op.
func TestRedeployKeepsRunsOnTheirGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, generations)
	old := b.manual(t, "gen", "before", nil)

	var d store.Deployed
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		d, err = b.engine.DeployTx(ctx, tx, "gen", []byte(strings.ReplaceAll(`
name: gen
trigger: { manual: {} }
steps:
  - { id: nap, delay: 1s }
  - { id: after, http_call: { url: "{{URL}}/v2" } }
`, "{{URL}}", b.recv.URL)))
		return err
	}))
	require.True(t, d.Changed)
	require.Equal(t, int64(2), d.Generation)
	fresh := b.manual(t, "gen", "after", nil)

	require.Equal(t, store.RunCompleted, b.waitRun(t, old).Status)
	require.Equal(t, store.RunCompleted, b.waitRun(t, fresh).Status)
	require.Len(t, b.recv.got("/v1"), 1, "the in-flight run kept generation 1")
	require.Len(t, b.recv.got("/v2"), 1, "the new run uses generation 2")

	// Stale jobs: wrong generation, wrong run attempt, wrong step attempt.
	staleBefore := b.engine.Stale.Load()
	for _, args := range []jobs.StepArgs{
		{RunID: old, StepKey: "after", Generation: 2, RunAttempt: 1, Attempt: 1},
		{RunID: old, StepKey: "after", Generation: 1, RunAttempt: 7, Attempt: 1},
	} {
		_, err := b.engine.Client().Insert(ctx, args, nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return b.engine.Stale.Load() >= staleBefore+2 }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	require.Len(t, b.recv.got("/v1"), 1, "stale jobs made no call")

	// Deploying the same definition again changes nothing.
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		again, err := b.engine.DeployTx(ctx, tx, "gen", []byte(strings.ReplaceAll(`
name: gen
trigger: { manual: {} }
steps:
  - id: nap
    delay: 1s
  - id: after
    http_call: { url: "{{URL}}/v2" }
`, "{{URL}}", b.recv.URL)))
		require.False(t, again.Changed, "formatting alone does not bump the generation")
		require.Equal(t, int64(2), again.Generation)
		return err
	}))
}
