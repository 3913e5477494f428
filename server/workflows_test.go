package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkflowsPauseResume drives pause and resume through the API: a run
// started while paused waits unstarted, the resume starts it, and a
// repeated command under the same key replays its answer.
func TestWorkflowsPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.api(t, http.MethodGet, "/v1/workflows", "", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	names := map[string]bool{}
	for _, w := range r.json(t)["workflows"].([]any) {
		names[w.(map[string]any)["name"].(string)] = w.(map[string]any)["paused"].(bool)
	}
	require.Contains(t, names, "manual")
	require.False(t, names["manual"])

	r = b.api(t, http.MethodPost, "/v1/workflows/manual/pause", "p1", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	wf := r.json(t)["workflow"].(map[string]any)
	require.Equal(t, true, wf["paused"])
	require.Equal(t, "paused by an operator", wf["paused_reason"])

	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run-while-paused", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	runID := r.json(t)["run_id"].(string)
	require.Zero(t, b.count(t, `SELECT count(*) FROM rflow.step_runs WHERE run_id = $1`, runID),
		"a paused workflow's run does not start")

	resume := b.api(t, http.MethodPost, "/v1/workflows/manual/resume", "r1", nil)
	require.Equal(t, http.StatusOK, resume.status, "%s", resume.body)
	body := resume.json(t)
	require.Equal(t, false, body["workflow"].(map[string]any)["paused"])
	require.Equal(t, float64(1), body["started"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM rflow.step_runs WHERE run_id = $1`, runID),
		"the resume started the run claimed during the pause")

	again := b.api(t, http.MethodPost, "/v1/workflows/manual/resume", "r1", nil)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, resume.body, again.body, "a repeated resume replays its answer")

	r = b.api(t, http.MethodGet, "/v1/workflows/manual", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, false, r.json(t)["workflow"].(map[string]any)["paused"])

	for _, path := range []string{"/v1/workflows/nope/pause", "/v1/workflows/nope/resume"} {
		r := b.api(t, http.MethodPost, path, "missing-"+path, nil)
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", path, r.body)
	}
	r = b.api(t, http.MethodGet, "/v1/workflows/nope", "", nil)
	require.Equal(t, http.StatusNotFound, r.status)
}
