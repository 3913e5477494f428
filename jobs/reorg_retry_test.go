package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs/reorgtest"
	"github.com/rflow-dev/rflow/store"
)

const reorgRetryOnReorg = `
      - id: note
        http_call: { method: POST, url: "%[1]s/note" }
      - id: undo
        http_call: { method: POST, url: "%[1]s/undo" }
        retry: { max_attempts: 1 }
      - id: after
        http_call: { method: POST, url: "%[1]s/after" }
`

// TestRetryFailedReorgResponse: an on_reorg response whose step failed is
// retried by `runs retry <run>` (RetryRunTx, also the HTTP route): the
// failed step runs again at a new attempt, the response goes on to its
// end, and nothing that completed runs again (the run's own steps, the
// response's earlier step). A second retry of the completed response is
// refused.
func TestRetryFailedReorgResponse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := newReceiver(t)
	pool, e := deployed(t, chainProject(t, reorgtest.Project("reorgretry", recv.URL, reorgRetryOnReorg), nil))
	recv.mu.Lock()
	recv.status["/undo"] = []int{500}
	recv.mu.Unlock()

	const fork = 5
	runID := reorgtest.ClaimAtFork(t, pool, e, fork)
	require.Eventually(t, func() bool {
		r, err := store.GetRun(ctx, pool, runID, false)
		require.NoError(t, err)
		return r.Status == store.RunCompleted
	}, 20*time.Second, 20*time.Millisecond)

	reorgtest.OrphanFork(t, pool, e, fork)
	response := func() *store.Response { return reorgtest.Response(t, pool, runID) }
	require.Eventually(t, func() bool { return response().Status.Terminal() }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, store.RunFailed, response().Status)
	require.Contains(t, *response().Error, "500")
	require.Empty(t, recv.got("/after"))

	retry := func() (*store.Run, error) {
		var run *store.Run
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			run, err = e.RetryRunTx(ctx, tx, runID)
			return err
		})
		return run, err
	}
	run, err := retry()
	require.NoError(t, err, "a failed response is retried")
	require.Equal(t, runID, run.ID)
	require.Equal(t, store.RunCompleted, run.Status, "the run itself is untouched")

	require.Eventually(t, func() bool { return response().Status.Terminal() }, 30*time.Second, 20*time.Millisecond)
	resp := response()
	require.Equal(t, store.RunCompleted, resp.Status, "error: %v", resp.Error)
	require.Nil(t, resp.Error)
	steps, err := store.JournalSteps(ctx, pool, store.ReorgJournal, resp.ID)
	require.NoError(t, err)
	byKey := map[string]*store.StepRun{}
	for _, s := range steps {
		byKey[s.Key] = s
	}
	require.Equal(t, store.StepCompleted, byKey["undo"].Status)
	require.Equal(t, 2, byKey["undo"].Attempt, "the failed step ran again at a new attempt")
	require.Equal(t, 1, byKey["note"].Attempt)
	require.Equal(t, store.StepCompleted, byKey["after"].Status)
	require.Len(t, recv.got("/undo"), 2)
	require.Len(t, recv.got("/note"), 1, "a completed step of the response never re-runs")
	require.Len(t, recv.got("/after"), 1)
	require.Len(t, recv.got("/act"), 1, "the run's steps never re-run")
	require.Equal(t, recv.got("/undo")[0].Header.Get("Idempotency-Key")+":r1", recv.got("/undo")[1].Header.Get("Idempotency-Key"),
		"an operator's retry is a new request: the key names the retry")

	_, err = retry()
	require.ErrorContains(t, err, "only failed runs can be retried")
}
