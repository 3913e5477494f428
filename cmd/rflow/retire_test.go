package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/signature"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const retireProject = `
name: retire
workflows:
  - name: keep
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "%[1]s/keep" } }
%[2]s`

const retiredHook = `
  - name: hook
    trigger: { webhook: { secret: "s3cret" } }
    steps:
      - { id: wait, delay: 2s }
      - { id: call, http_call: { method: POST, url: "%[1]s/hook" } }
  - name: tick
    trigger: { cron: { schedule: "@every 1s" } }
    steps:
      - { id: call, http_call: { method: POST, url: "%[1]s/tick" } }
`

// A workflow removed from the file is retired by `rflow workflows deploy`:
// it is listed as retired, its webhook answers 410, its cron stops, its
// run in flight finishes on its generation, and `--keep-missing` or a
// deploy of named workflows retires nothing. An API-deployed workflow is
// never retired for missing from a file.
func TestDeployRetiresWorkflowsTheFileNoLongerHas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPathCounter(t)
	dir := t.TempDir()
	full, trimmed := filepath.Join(dir, "full.yaml"), filepath.Join(dir, "trimmed.yaml")
	require.NoError(t, os.WriteFile(full, []byte(fmt.Sprintf(retireProject, s.URL, fmt.Sprintf(retiredHook, s.URL))), 0o644))
	require.NoError(t, os.WriteFile(trimmed, []byte(fmt.Sprintf(retireProject, s.URL, "")), 0o644))
	db := storetest.URL(t)
	pool := openPool(t, db)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	p := startRflowArgs(t, []string{"RFLOW_API_TOKEN=t0ken"}, "--database-url", db, "--log-level", "info", "start", "-c", full, "--http", addr)
	defer p.stop(t)
	base := "http://" + addr
	require.Eventually(t, func() bool { return s.hits("/tick") > 0 }, 30*time.Second, 50*time.Millisecond, "output:\n%s", p.out)

	post := func() int {
		body := []byte(`{"n": 1}`)
		req, _ := http.NewRequest(http.MethodPost, base+"/hooks/hook", bytes.NewReader(body))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set(signature.HeaderTimestamp, ts)
		req.Header.Set(signature.HeaderSignature, signature.Sign("s3cret", ts, body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Less(t, post(), 300, "the webhook runs while the workflow is in the file")

	// An API deploy, which no file has, is never retired for that.
	api, _ := http.NewRequest(http.MethodPut, base+"/v1/workflows/byapi", bytes.NewReader([]byte(
		"name: byapi\ntrigger: { manual: {} }\nsteps:\n  - { id: d, delay: 1s }\n")))
	api.Header.Set("Authorization", "Bearer t0ken")
	api.Header.Set("Idempotency-Key", "deploy-byapi")
	resp, err := http.DefaultClient.Do(api)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)

	// --keep-missing and a named deploy retire nothing.
	_, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", trimmed, "--keep-missing")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", trimmed, "--workflow", "keep")
	require.Equal(t, 0, code, stderr)
	w, err := store.GetWorkflow(ctx, pool, "hook")
	require.NoError(t, err)
	require.Nil(t, w.RetiredAt)

	out, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", trimmed)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "hook")
	require.Contains(t, out, "retired: not in the project file")
	require.Contains(t, out, "tick")
	require.NotContains(t, out, "byapi")

	ls, stderr, code := rflowCmd(t, "--database-url", db, "workflows", "ls", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var rows []store.WorkflowRow
	require.NoError(t, json.Unmarshal([]byte(ls), &rows))
	state := map[string]bool{}
	for _, r := range rows {
		state[r.Name] = r.RetiredAt != nil
	}
	require.Equal(t, map[string]bool{"keep": false, "hook": true, "tick": true, "byapi": false}, state)

	require.Eventually(t, func() bool { return post() == http.StatusGone }, 10*time.Second, 100*time.Millisecond)
	ticks := s.hits("/tick")
	time.Sleep(3 * time.Second)
	require.LessOrEqual(t, s.hits("/tick"), ticks+1, "the retired cron stops ticking")
	require.Equal(t, 1, s.hits("/hook"), "the webhook run in flight finished on its generation")
	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM rflow.workflow_runs WHERE workflow_name = 'hook'`).Scan(&status))
	require.Equal(t, "completed", status)

	// Back in the file, deployed again: no longer retired.
	_, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", full)
	require.Equal(t, 0, code, stderr)
	w, err = store.GetWorkflow(ctx, pool, "hook")
	require.NoError(t, err)
	require.Nil(t, w.RetiredAt)
}
