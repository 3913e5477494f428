package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCancelAndPauseTakeAReason: POST /v1/runs/{id}/cancel and
// /v1/workflows/{name}/pause keep {"reason": "…"} as the CLI's --reason
// does; a body that is not that is a 400 that changes nothing.
func TestCancelAndPauseTakeAReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := func(key string) string {
		r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", key, nil)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		return r.json(t)["run_id"].(string)
	}
	run := func(id string) map[string]any {
		r := b.api(t, http.MethodGet, "/v1/runs/"+id, "", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.json(t)["run"].(map[string]any)
	}

	id := start("start-1")
	for i, bad := range []struct{ body, code string }{
		{`{"reason":`, "malformed_json"},
		{`{"reasn": "typo"}`, "malformed_json"},
		{`{"reason": 5}`, "malformed_json"},
		{`"just a string"`, "malformed_json"},
		{`{"reason": "a"} {}`, "malformed_json"},
		{`{"reason": "` + strings.Repeat("é", 1001) + `"}`, "reason_too_long"},
	} {
		r := b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "bad-cancel-"+string(rune('a'+i)), []byte(bad.body))
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", bad.body, r.body)
		require.Equal(t, bad.code, r.errorCode(t), bad.body)
		require.NotEqual(t, "cancelled", run(id)["status"], "a refused cancel changes nothing")
	}

	r := b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "c1", []byte(`{"reason": "  duplicate of the 12:04 deposit "}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	got := r.json(t)["run"].(map[string]any)
	require.Equal(t, "cancelled", got["status"])
	require.Equal(t, "duplicate of the 12:04 deposit", got["cancel_reason"])
	require.Equal(t, "duplicate of the 12:04 deposit", run(id)["cancel_reason"], "GET /v1/runs/{id} shows it")
	r = b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "c2", []byte(`{"reason": "another"}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "duplicate of the 12:04 deposit", r.json(t)["run"].(map[string]any)["cancel_reason"], "the first reason stays")

	// No body, {} and a null reason cancel as before, with no reason.
	for i, body := range []string{"", "{}", `{"reason": null}`, `{"reason": "   "}`} {
		id := start("start-plain-" + string(rune('a'+i)))
		r := b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "plain-"+string(rune('a'+i)), []byte(body))
		require.Equal(t, http.StatusOK, r.status, "%q: %s", body, r.body)
		got := r.json(t)["run"].(map[string]any)
		require.Equal(t, "cancelled", got["status"])
		require.NotContains(t, got, "cancel_reason", "%q", body)
	}

	wf := func() map[string]any {
		r := b.api(t, http.MethodGet, "/v1/workflows/manual", "", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.json(t)["workflow"].(map[string]any)
	}
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/pause", "p0", []byte(`{"why": "x"}`))
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, "malformed_json", r.errorCode(t))
	require.Equal(t, false, wf()["paused"], "a refused pause pauses nothing")
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/pause", "p1", []byte(`{"reason": "`+strings.Repeat("x", 1001)+`"}`))
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, "reason_too_long", r.errorCode(t))
	require.Equal(t, false, wf()["paused"])

	r = b.api(t, http.MethodPost, "/v1/workflows/manual/pause", "p2", []byte(`{"reason": "vendor API down"}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "vendor API down", r.json(t)["workflow"].(map[string]any)["paused_reason"])
	require.Equal(t, "vendor API down", wf()["paused_reason"])

	r = b.api(t, http.MethodPost, "/v1/workflows/open/pause", "p3", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "paused by an operator", r.json(t)["workflow"].(map[string]any)["paused_reason"], "no body: as before")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM rflow.idempotency_keys WHERE key LIKE 'bad-%' OR key IN ('p0', 'p1')`),
		"refused requests leave their keys free")
}
