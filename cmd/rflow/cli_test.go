package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// rflowCmd runs the rflow binary and returns stdout, stderr and the exit code.
func rflowCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(rflowBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

func TestExitCodesAndErrors(t *testing.T) {
	t.Parallel()
	out, _, code := rflowCmd(t, "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "rflow ")

	_, stderr, code := rflowCmd(t, "bogus")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "bogus"`)

	_, stderr, code = rflowCmd(t, "runs", "show", "not-a-uuid")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "is not a run id")

	_, stderr, code = rflowCmd(t, "runs", "list", "--status", "done")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--status "done" is not a run status; use one of queued, throttled, running,`)

	_, stderr, code = rflowCmd(t, "migrate", "--nope")
	require.Equal(t, 2, code)

	_, stderr, code = rflowCmd(t, "--database-url", "postgres://x@127.0.0.1:1/db", "migrate")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	require.Contains(t, stderr, "cannot reach the database")
	require.NotContains(t, stderr, "goroutine")

	for _, args := range [][]string{{"--help"}, {"runs", "--help"}, {"runs", "list", "--help"}, {"start", "--help"}, {"workflows", "pause", "--help"}} {
		_, _, code := rflowCmd(t, args...)
		require.Equal(t, 0, code, "%v", args)
	}
}

// TestUsageErrorsNameTheCommand: an argument a command does not take is a
// usage error (exit 2) naming the command as typed, never ignored (`runs
// list hello` is not a filter), and --workers below 1 is refused rather
// than quietly replaced by the default.
func TestUsageErrorsNameTheCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "list", "hello"}, `runs list takes no arguments, got "hello" (filter with --workflow W`},
		{[]string{"workflows", "ls", "hello"}, `workflows ls takes no arguments, got "hello"`},
		{[]string{"budgets", "ls", "refunds"}, `budgets ls takes no arguments, got "refunds"`},
		{[]string{"approvals", "list", "x"}, `approvals list takes no arguments, got "x"`},
		{[]string{"runs", "show"}, "rflow: runs show takes exactly one run id"},
		{[]string{"approve", "zzz"}, `"zzz" is not an approval id (a UUID, or its short id: its last 8 characters`},
		{[]string{"reject", "not-an-id"}, `"not-an-id" is not an approval id`},
		{[]string{"workflows", "pause"}, "rflow: workflows pause takes exactly one workflow name"},
		{[]string{"runs", "prune", "--older-than", "5x"}, `--older-than: "5x" is not a duration (use e.g. 30s, 10m, 1h30m, 7d)` + "\n"},
		{[]string{"start", "--workers", "0"}, "--workers 0: want at least 1"},
		{[]string{"start", "--poll-interval", "1ms"}, "--poll-interval 1ms: want at least 5ms"},
		{[]string{"dev", "--workers", "-1"}, "--workers -1: want at least 1"},
		{[]string{"test", "--parallel", "0"}, "--parallel 0: want at least 1"},
		{[]string{"test", "--timeout", "0s"}, "--timeout 0s: want a positive duration"},
	} {
		_, stderr, code := rflowCmd(t, c.args...)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, c.args)
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t) // already migrated: migrate is a no-op
	out, _, code := rflowCmd(t, "--database-url", url, "migrate")
	require.Equal(t, 0, code)
	require.Contains(t, out, "up to date")
	out, _, code = rflowCmd(t, "--database-url", url, "migrate", "status")
	require.Equal(t, 0, code)
	require.Contains(t, out, "001")
	require.Contains(t, out, "river: up to date")
}

const cliProject = `
name: cli
workflows:
  - name: hello
    trigger: { manual: {} }
    steps:
      - { id: greet, http_call: { method: POST, url: "%[1]s/greet", body: "${{ trigger.input }}" } }
      - { id: flaky, http_call: { url: "%[1]s/flaky" } }
  - name: sleepy
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 1h }
`

func TestRunsAndWorkflowsCommands(t *testing.T) {
	t.Parallel()
	var failFlaky atomic.Bool
	failFlaky.Store(true)
	var greets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/greet" {
			greets.Add(1)
		}
		if r.URL.Path == "/flaky" && failFlaky.Load() {
			w.WriteHeader(500)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(cliProject, srv.URL)), 0o644))
	db := storetest.URL(t)
	p := startRflow(t, db, config, "")
	defer p.stop(t)
	cli := func(args ...string) (string, int) {
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		if code != 0 {
			t.Logf("rflow %v: %s", args, stderr)
		}
		return out, code
	}
	// rflow start syncs the workflows; wait for it.
	require.Eventually(t, func() bool {
		out, code := cli("workflows", "ls", "-o", "json")
		return code == 0 && strings.Contains(out, `"hello"`)
	}, 20*time.Second, 100*time.Millisecond)

	out, code := cli("run", "hello", "-c", config, "--key", "k1", "--input", `{"who":"ops"}`, "-o", "json")
	require.Equal(t, 0, code)
	var started struct {
		RunID   string `json:"run_id"`
		Created bool   `json:"created"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.True(t, started.Created)
	out, code = cli("run", "hello", "-c", config, "--key", "k1", "--input", `{ "who": "ops" }`)
	require.Equal(t, 0, code, "the same key and input: the recorded run")
	require.Contains(t, out, "already has run "+started.RunID)
	for _, in := range []string{`{"who":"dev"}`, ""} {
		args := []string{"--database-url", db, "run", "hello", "-c", config, "--key", "k1"}
		if in != "" {
			args = append(args, "--input", in)
		}
		out, stderr, code := rflowCmd(t, args...)
		require.Equal(t, 1, code, "the key with another input (%q) is a conflict: %s", in, out)
		require.Contains(t, stderr, "already started run "+started.RunID+" with a different input")
		require.True(t, strings.HasPrefix(stderr, `rflow: key "k1" of workflow hello`), "one rflow: prefix: %q", stderr)
	}

	// flaky answers 500 and has no retry policy: the run is dead-lettered.
	require.Eventually(t, func() bool {
		out, _ := cli("runs", "list", "--failed", "-o", "json")
		return strings.Contains(out, started.RunID)
	}, 20*time.Second, 100*time.Millisecond)
	out, code = cli("runs", "show", started.RunID)
	require.Equal(t, 0, code)
	require.Contains(t, out, "unexpected status 500")

	failFlaky.Store(false)
	out, code = cli("runs", "retry", started.RunID, "-c", config)
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool {
		out, _ := cli("runs", "show", started.RunID, "-o", "json")
		var run struct {
			Status string `json:"status"`
			Steps  []struct {
				Key     string `json:"step_key"`
				Attempt int    `json:"attempt"`
			} `json:"steps"`
		}
		return json.Unmarshal([]byte(out), &run) == nil && run.Status == "completed" && len(run.Steps) == 2
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, int64(1), greets.Load(), "the completed step was not re-run by the retry")

	// Cancel a parked run.
	out, code = cli("run", "sleepy", "-c", config, "-o", "json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	out, code = cli("runs", "cancel", started.RunID, "-c", config, "-o", "json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"status": "cancelled"`)
	again, code := cli("runs", "cancel", started.RunID, "-c", config, "-o", "json")
	require.Equal(t, 0, code, "a repeated cancel returns the recorded result")
	require.JSONEq(t, out, again, "the same run state, finished_at included")

	// Pause: claims wait in queued; resume starts them.
	_, code = cli("workflows", "pause", "hello")
	require.Equal(t, 0, code)
	out, code = cli("run", "hello", "-c", config, "--key", "while-paused", "-o", "json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	time.Sleep(500 * time.Millisecond)
	out, _ = cli("runs", "show", started.RunID, "-o", "json")
	require.Contains(t, out, `"status": "queued"`)
	out, code = cli("workflows", "resume", "hello", "-c", config)
	require.Equal(t, 0, code)
	require.Contains(t, out, "1 waiting run(s) started")
	require.Eventually(t, func() bool {
		out, _ := cli("runs", "show", started.RunID, "-o", "json")
		return strings.Contains(out, `"status": "completed"`)
	}, 20*time.Second, 100*time.Millisecond)
	_, code = cli("workflows", "pause", "nope")
	require.Equal(t, 1, code)
}

const offlineProject = `
name: offline
networks:
  - { name: local, chain_id: 31337, rpc: %q }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: hello
    trigger: { manual: {} }
    steps:
      - { id: flaky, http_call: { url: "%s/flaky" } }
  - name: sleepy
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 1h }
`

// TestOperatorCommandsDialNoNode: run, runs retry and runs cancel only
// enqueue work, so a project whose node is down (its rpc: URL a closed
// port, over WebSocket, which a client would connect to at once) neither
// delays nor fails them, and they say nothing about the node.
func TestOperatorCommandsDialNoNode(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
	}))
	defer srv.Close()
	closed := anviltest.DeadAddr(t)
	write := func(name, rpc string) string {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(offlineProject, rpc, "0x"+anviltest.DevKeys[1], srv.URL)), 0o644))
		return path
	}
	// rflow start works the runs; its node (HTTP) is contacted only by a send.
	worked := write("start.yaml", "http://"+closed)
	offline := write("rflow.yaml", "ws://"+closed)
	db := storetest.URL(t)
	p := startRflow(t, db, worked, "")
	defer p.stop(t)
	cli := func(args ...string) string {
		t.Helper()
		began := time.Now()
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		require.Equal(t, 0, code, "rflow %v: %s", args, stderr)
		require.Less(t, time.Since(began), 10*time.Second, "rflow %v waited", args)
		require.NotContains(t, out+stderr, closed, "rflow %v reported the node", args)
		return out
	}
	require.Eventually(t, func() bool {
		return strings.Contains(cli("workflows", "ls", "-o", "json"), `"hello"`)
	}, 20*time.Second, 100*time.Millisecond)

	var started struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(cli("run", "hello", "-c", offline, "-o", "json")), &started))
	require.Eventually(t, func() bool {
		return strings.Contains(cli("runs", "list", "--failed", "-o", "json"), started.RunID)
	}, 20*time.Second, 100*time.Millisecond)
	require.Contains(t, cli("runs", "retry", started.RunID, "-c", offline), "retried")

	require.NoError(t, json.Unmarshal([]byte(cli("run", "sleepy", "-c", offline, "-o", "json")), &started))
	require.Contains(t, cli("runs", "cancel", started.RunID, "-c", offline), "cancelled")
}
