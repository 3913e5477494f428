package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/devchain"
)

var completedRun = regexp.MustCompile(`run=(\S+) workflow=on-deposit completed`)

// A kill -9 of the embedded Postgres under `rflow dev` is one "down" line,
// a "restarting" and a "back" line (no flood of connection errors), and
// runs complete after it. When the data directory no longer starts, rflow
// dev exits 1 with one line saying so.
func TestDevRestartsItsKilledPostgres(t *testing.T) {
	t.Parallel()
	dataHome := publicTempDir(t)
	var out syncBuffer
	cmd := exec.Command(rflowBin, "dev", "--http", "127.0.0.1:0", "--emit-every", "1s", "--chain", devchain.BackendSimulated)
	cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL"), "XDG_DATA_HOME="+dataHome)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })

	waitOutput := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.After(120 * time.Second)
		for !ok(out.String()) {
			select {
			case <-deadline:
				t.Fatalf("no %s; output:\n%s", what, out.String())
			case <-done:
				t.Fatalf("rflow dev exited before %s; output:\n%s", what, out.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	waitOutput("completed run", completedRun.MatchString)
	m := bannerPostgres.FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	pid, _ := strconv.Atoi(m[1])
	dataDir := m[2]

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	waitOutput("postgres back", func(s string) bool { return strings.Contains(s, "postgres back: pid ") })
	before := len(completedRun.FindAllString(out.String(), -1))
	waitOutput("a run completed after the restart", func(s string) bool {
		return len(completedRun.FindAllString(s, -1)) > before
	})
	var lines []string // from the down line to the back line
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(l, "postgres down"), len(lines) > 0 && !strings.Contains(l, " chain deposit "): // the dev chain goes on
			lines = append(lines, l)
		}
		if strings.Contains(l, "postgres back") {
			break
		}
	}
	outage := strings.Join(lines, "\n")
	require.Len(t, lines, 3, "one line per state change, nothing else; got:\n%s", outage)
	require.Contains(t, lines[0], "postgres down: embedded postgres exited (signal: killed)")
	require.Contains(t, lines[1], "postgres restarting (attempt 1 of 6)")
	require.Contains(t, lines[2], "postgres back: pid ")

	// Unusable: the server's configuration no longer parses.
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "postgresql.conf"), []byte("not = = a config\n"), 0o600))
	m = regexp.MustCompile(`postgres back: pid (\d+)`).FindStringSubmatch(out.String())
	pid, _ = strconv.Atoi(m[1])
	mark := len(out.String())
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("rflow dev did not give up; output:\n%s", out.String())
	}
	require.Equal(t, 1, cmd.ProcessState.ExitCode(), out.String())
	tail := strings.Split(strings.TrimSpace(out.String()[mark:]), "\n")
	var rest []string
	for _, l := range tail {
		if !strings.Contains(l, " chain deposit ") {
			rest = append(rest, l)
		}
	}
	tail = rest
	require.Contains(t, tail[0], "postgres down:")
	for _, l := range tail[1 : len(tail)-1] {
		require.Contains(t, l, "postgres restarting (attempt ", "only state changes; got:\n%s", out.String()[mark:])
	}
	require.Len(t, tail, 8, "down, 6 restarts, the exit line; got:\n%s", out.String()[mark:])
	require.Regexp(t, `^rflow: embedded postgres is down and did not come back after 6 restarts: .*; stopping \(data in `, tail[len(tail)-1])
}

const pgKillProject = `
name: pgkill
workflows:
  - name: slow
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 6s }
      - { id: after, http_call: { method: POST, url: "%s/after" } }
`

// The same under `rflow start` on embedded defaults, without a terminal: a
// run waiting in a delay while its Postgres is killed completes after the
// restart, and stderr has one line per state change.
func TestStartRestartsItsKilledPostgres(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	dir := publicTempDir(t)
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(pgKillProject, s.URL)), 0o644))
	// DATABASE_URL empty: the embedded defaults whatever the environment.
	env := []string{"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "DATABASE_URL="}
	p := startRflowArgs(t, env, "--log-level", "warn", "start", "-c", config,
		"--http", "127.0.0.1:0")
	dataDir := regexp.MustCompile(`embedded postgres, data in (\S+)`)
	require.Eventually(t, func() bool { return dataDir.MatchString(p.out.String()) }, 120*time.Second, 100*time.Millisecond,
		"no embedded postgres; output:\n%s", p.out)
	data := dataDir.FindStringSubmatch(p.out.String())[1]
	url := regexp.MustCompile(`database (postgres://\S+)`).FindStringSubmatch(p.out.String())[1]
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", url, "run", "slow", "-c", config, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &started) == nil
	}, 60*time.Second, 200*time.Millisecond)

	// The engine is up and working the run: it waits in its delay.
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", url, "runs", "show", started.RunID, "-o", "json")
		return code == 0 && strings.Contains(out, `"status": "waiting_delay"`)
	}, 60*time.Second, 100*time.Millisecond, "the run never started; output:\n%s", p.out)
	pidFile, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "rflow: postgres back: pid ") }, 60*time.Second,
		100*time.Millisecond, "no restart; output:\n%s", p.out)
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", url, "runs", "show", started.RunID, "-o", "json")
		return code == 0 && strings.Contains(out, `"status": "completed"`)
	}, 60*time.Second, 200*time.Millisecond, "the run did not complete after the restart; output:\n%s", p.out)
	require.Equal(t, 1, s.counts()[started.RunID+":after"], "the step after the outage ran once")
	outage := p.out.String()[strings.Index(p.out.String(), "rflow: postgres down"):strings.Index(p.out.String(), "rflow: postgres back")]
	require.Equal(t, 2, strings.Count(outage, "\n"), "one line per state change, nothing else:\n%s", outage)
	p.stop(t)
}
