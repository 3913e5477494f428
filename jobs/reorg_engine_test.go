package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs/reorgtest"
	"github.com/rflow-dev/rflow/store"
)

const reorgStepsOnReorg = `
      - id: each
        foreach: "${{ [10, 20, 30] }}"
        steps:
          - id: undo
            http_call: { method: POST, url: "%[1]s/undo/${{ item }}" }
      - id: seen
        if: "${{ steps.act.status == 'completed' && len(steps.each.output) == 3 }}"
        http_call: { method: POST, url: "%[1]s/seen", body: { fork: "${{ reorg.fork_block }}", run: "${{ run.id }}" } }
      - id: skipped
        if: "${{ reorg.depth > 100 }}"
        http_call: { method: POST, url: "%[1]s/never" }
      - id: flaky
        http_call: { method: POST, url: "%[1]s/flaky" }
        retry: { max_attempts: 3, backoff: fixed, delay: 10ms }
      - id: boom
        fail: "compensation gave up at fork ${{ reorg.fork_block }}"
`

// TestOnReorgStepsRunOnTheRunEngine: a response's steps are executed by the
// same engine as a run's — foreach items journal as each[i], if: skips,
// retry: retries at new attempts, fail: fails the response with its
// message — in the response's own journal, and expressions see the run's
// steps, the run and the reorg. The reorg is applied the way the chain
// service applies it (store.ApplyReorg, then the engine's OnReorg hook, in
// one transaction), so no chain is needed.
func TestOnReorgStepsRunOnTheRunEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := newReceiver(t)
	pool, e := deployed(t, chainProject(t, reorgtest.Project("reorgsteps", recv.URL, reorgStepsOnReorg), nil))
	recv.mu.Lock()
	recv.status["/flaky"] = []int{503}
	recv.mu.Unlock()

	const fork = 5
	runID := reorgtest.ClaimAtFork(t, pool, e, fork)
	require.Eventually(t, func() bool { return len(recv.got("/act")) == 1 }, 20*time.Second, 20*time.Millisecond)

	// The reorg replaces block 5 and the window runs far past it.
	reorgtest.OrphanFork(t, pool, e, fork)

	var resp *store.Response
	require.Eventually(t, func() bool {
		rs, err := store.RunResponses(ctx, pool, runID)
		require.NoError(t, err)
		resp = rs[0]
		return resp.Status.Terminal()
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, store.RunFailed, resp.Status)
	require.NotNil(t, resp.Error)
	require.Contains(t, *resp.Error, "compensation gave up at fork 5")

	steps, err := store.JournalSteps(ctx, pool, store.ReorgJournal, resp.ID)
	require.NoError(t, err)
	byKey := map[string]*store.StepRun{}
	for _, s := range steps {
		byKey[s.Key] = s
	}
	for i := range 3 {
		require.Equal(t, store.StepCompleted, byKey[fmt.Sprintf("undo[%d]", i)].Status)
	}
	require.Equal(t, store.StepCompleted, byKey["each"].Status)
	require.Equal(t, store.StepCompleted, byKey["seen"].Status)
	require.Equal(t, store.StepSkipped, byKey["skipped"].Status)
	require.Equal(t, store.StepCompleted, byKey["flaky"].Status)
	require.Equal(t, 2, byKey["flaky"].Attempt, "retried once")
	require.Equal(t, store.StepFailed, byKey["boom"].Status)
	for _, p := range []string{"/undo/10", "/undo/20", "/undo/30", "/seen"} {
		require.Len(t, recv.got(p), 1, p)
	}
	require.Len(t, recv.got("/flaky"), 2)
	require.Empty(t, recv.got("/never"))
	require.JSONEq(t, fmt.Sprintf(`{"fork": 5, "run": %q}`, runID), recv.got("/seen")[0].Body)
	seen := recv.got("/seen")[0].Header
	require.Equal(t, runID.String(), seen.Get("X-Rflow-Run-Id"), "a response's request names the run it answers")
	require.Equal(t, resp.ID.String(), seen.Get("X-Rflow-Reorg-Response"))
	require.Equal(t, resp.ID.String()+":seen", seen.Get("Idempotency-Key"), "keyed on the response: never a key of the run's own steps")
	require.Empty(t, recv.got("/act")[0].Header.Get("X-Rflow-Reorg-Response"))

	// The run itself had completed: it keeps its status and journal, and
	// a failed response does not trip anything on it.
	run, err := store.GetRun(ctx, pool, runID, false)
	require.NoError(t, err)
	require.Equal(t, store.RunCompleted, run.Status)
	require.NotNil(t, run.OrphanedAt)
	list, err := store.ListRuns(ctx, pool, store.RunFilter{Compensated: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
}
