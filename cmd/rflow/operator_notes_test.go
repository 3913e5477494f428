package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// runs cancel --reason and workflows pause --reason keep what the operator
// said: runs show and workflows ls print it, -o json has it (cancel_reason,
// paused_reason). rflow status counts the runs and names the console of
// the live process, as a table and as JSON.
func TestOperatorReasonsAndStatus(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(cliProject, srv.URL)), 0o644))
	db := storetest.URL(t)
	p := startRflowArgs(t, nil, "--database-url", db, "--log-level", "warn", "start", "-c", config, "--http", "127.0.0.1:0")
	defer p.stop(t)
	cli := func(args ...string) string {
		t.Helper()
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		require.Equal(t, 0, code, "rflow %v: %s", args, stderr)
		return out
	}
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", db, "workflows", "ls", "-o", "json")
		return code == 0 && strings.Contains(out, `"sleepy"`)
	}, 30*time.Second, 100*time.Millisecond)

	var started struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(cli("run", "sleepy", "-c", config, "-o", "json")), &started))
	require.Eventually(t, func() bool {
		return strings.Contains(cli("runs", "show", started.RunID), "waiting_delay")
	}, 30*time.Second, 100*time.Millisecond)

	// The overview counts the waiting run and names the console.
	var o overview
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal([]byte(cli("status", "-o", "json")), &o))
		return o.Runs.Waiting == 1 && len(o.Consoles) == 1
	}, 30*time.Second, 100*time.Millisecond)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/ui/$`, o.Consoles[0])
	table := cli("status")
	require.Contains(t, table, "runs         0 running, 1 waiting, 0 failed, 0 completed")
	require.Contains(t, table, "console      "+o.Consoles[0])

	// A reason past store.MaxReasonLen is a usage error that changes nothing.
	long := strings.Repeat("x", 1001)
	for _, args := range [][]string{{"runs", "cancel", started.RunID, "--reason", long}, {"workflows", "pause", "hello", "--reason", long}} {
		_, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		require.Equal(t, 2, code, "rflow %v: %s", args[:3], stderr)
		require.Contains(t, stderr, "the reason is 1001 characters long; the limit is 1000")
	}
	require.Contains(t, cli("runs", "show", started.RunID), "waiting_delay", "the refused cancel left the run alone")
	require.Regexp(t, `hello\s+\d+\s+active\s+false`, cli("workflows", "ls"), "the refused pause left the workflow alone")

	out := cli("runs", "cancel", started.RunID, "--reason", "duplicate of an earlier payout", "-o", "json")
	var cancelled struct {
		Status       string `json:"status"`
		CancelReason string `json:"cancel_reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &cancelled), out)
	require.Equal(t, "cancelled", cancelled.Status)
	require.Equal(t, "duplicate of an earlier payout", cancelled.CancelReason)
	require.Contains(t, cli("runs", "show", started.RunID), "reason    duplicate of an earlier payout")
	out = cli("runs", "cancel", started.RunID, "--reason", "something else")
	require.Contains(t, out, "cancelled (status cancelled)", "cancelling again is effect-idempotent")
	require.Contains(t, cli("runs", "show", started.RunID, "-o", "json"), `"cancel_reason": "duplicate of an earlier payout"`,
		"the first reason stays")

	require.Contains(t, cli("workflows", "pause", "hello", "--reason", "vendor API down"), "workflow hello paused")
	require.Regexp(t, `hello\s+\d+\s+active\s+true\s+\S+\s+vendor API down`, cli("workflows", "ls"))
	require.Contains(t, cli("workflows", "ls", "-o", "json"), `"paused_reason": "vendor API down"`)
	cli("workflows", "resume", "hello", "-c", config)
	cli("workflows", "pause", "hello")
	require.Contains(t, cli("workflows", "ls", "-o", "json"), `"paused_reason": "paused by an operator"`, "no reason: the default")
}
