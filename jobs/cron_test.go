package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

const cronProject = `
name: t
workflows:
  - name: catchup
    trigger: { cron: { schedule: "* * * * *", catch_up: true } }
    steps:
      - { id: ping, http_call: { url: "{{URL}}/catchup" } }
  - name: skip
    trigger: { cron: { schedule: "* * * * *" } }
    steps:
      - { id: ping, http_call: { url: "{{URL}}/skip" } }
`

// TestCronCatchUp: with catch_up, the minutes missed since the last claimed
// tick are claimed on boot; without it, they are skipped.
func TestCronCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, cronProject)
	last := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
	for _, wf := range []string{"catchup", "skip"} {
		_, err := b.pool.Exec(ctx, `
			INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, status)
			VALUES (gen_random_uuid(), $1, 1, $2, 'cron', 'completed')`, wf, last.Format(time.RFC3339))
		require.NoError(t, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.engine.RunCron(cctx)

	keys := func(wf string) map[string]bool {
		runs, err := store.ListRuns(ctx, b.pool, store.RunFilter{Workflow: wf, Limit: 100})
		require.NoError(t, err)
		out := map[string]bool{}
		for _, r := range runs {
			out[r.TriggerKey] = true
		}
		return out
	}
	require.Eventually(t, func() bool { return len(keys("catchup")) >= 6 }, 10*time.Second, 50*time.Millisecond)
	got := keys("catchup")
	for i := 1; i <= 4; i++ {
		require.True(t, got[last.Add(time.Duration(i)*time.Minute).Format(time.RFC3339)], "missed tick %d replayed", i)
	}
	time.Sleep(time.Second)
	for k := range keys("skip") {
		tick, err := time.Parse(time.RFC3339, k)
		require.NoError(t, err)
		require.False(t, tick.After(last) && tick.Before(time.Now().UTC().Truncate(time.Minute)), "tick %s should have been skipped", k)
	}
}
