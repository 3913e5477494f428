package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

const slowProject = `
name: slow
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: a
        http_call: { method: POST, url: "%s/slow", timeout: 120s }
`

// slowSink answers after delay and counts the requests that arrived.
func slowSink(t *testing.T, delay time.Duration) (*httptest.Server, *atomic.Int64) {
	var arrived atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(s.Close)
	return s, &arrived
}

// --log-format json makes every stderr line a JSON object; River's own info
// lines ("River client started", producer job counts) are at debug, so
// --log-level info leaves them out and --log-level debug shows them.
func TestLogFormatJSONAndQuietRiver(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	config := writeConfig(t, fmt.Sprintf(slowProject, "http://127.0.0.1:1"))
	for _, level := range []string{"info", "debug"} {
		p := startRflowArgs(t, nil, "start", "-c", config, "--database-url", db, "--log-format", "json", "--log-level", level)
		require.Eventually(t, func() bool { return strings.Contains(p.out.String(), `"msg":"rflow started"`) },
			30*time.Second, 50*time.Millisecond, "output: %s", p.out)
		if level == "debug" {
			require.Eventually(t, func() bool { return strings.Contains(p.out.String(), `"msg":"River client started"`) },
				10*time.Second, 50*time.Millisecond, "output: %s", p.out)
		}
		p.stop(t)
		var river []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(p.out.String()), "\n") {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "not a JSON line: %q", line)
			require.Contains(t, rec, "level")
			if rec["component"] == "river" {
				river = append(river, rec)
			}
		}
		for _, rec := range river {
			require.NotEqual(t, "INFO", rec["level"], "a River line at info: %v", rec)
		}
		if level == "info" {
			require.NotContains(t, p.out.String(), "River client started")
		} else {
			require.NotEmpty(t, river)
		}
	}
	var out, errOut bytes.Buffer
	require.Equal(t, exitUsage, run([]string{"rflow", "--log-format", "yaml", "version"}, &out, &errOut))
	require.Contains(t, errOut.String(), `--log-format "yaml": use text or json`)
	errOut.Reset()
	require.Equal(t, exitUsage, run([]string{"rflow", "version", "--log-level", "loud"}, &out, &errOut))
	require.Contains(t, errOut.String(), `--log-level "loud": use debug, info, warn or error`)
}

// A clean stop (here SIGHUP, as a closed terminal sends; steps in flight finish) leaves nothing for the
// next process to rescue: it logs no "rescued jobs of a dead process", and
// the stopped process's node is gone.
func TestStartCleanStopRescuesNothing(t *testing.T) {
	t.Parallel()
	if signal.Ignored(syscall.SIGHUP) {
		// Under nohup rflow inherits the ignored hang-up, by design.
		t.Skip("SIGHUP is ignored in this process (nohup): rflow start would ignore it too")
	}
	db := storetest.URL(t)
	s, arrived := slowSink(t, 2*time.Second)
	config := writeConfig(t, fmt.Sprintf(slowProject, s.URL))
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	defer pool.Close()

	first := startRflowArgs(t, nil, "start", "-c", config, "--database-url", db, "--workers", "8")
	require.Eventually(t, func() bool { return strings.Contains(first.out.String(), `msg="rflow started"`) }, 30*time.Second, 50*time.Millisecond)
	enqueueManual(t, pool, config, 4)
	require.Eventually(t, func() bool { return arrived.Load() >= 4 }, 20*time.Second, 50*time.Millisecond)
	// A hang-up (the terminal closed) while the 4 steps are in flight is a
	// clean stop too: they finish, and the process exits 0.
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGHUP))
	select {
	case <-first.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("rflow did not stop on SIGHUP; output:\n%s", first.out)
	}
	require.Equal(t, 0, first.cmd.ProcessState.ExitCode(), "output:\n%s", first.out)
	var nodes int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM rflow.nodes`).Scan(&nodes))
	require.Zero(t, nodes, "a cleanly stopped process left its node row")

	second := startRflowArgs(t, nil, "start", "-c", config, "--database-url", db, "--log-level", "debug")
	require.Eventually(t, func() bool { return strings.Contains(second.out.String(), `msg="rflow started"`) }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(3 * time.Second) // a few liveness rounds
	second.stop(t)
	require.NotContains(t, first.out.String(), "rescued jobs")
	require.NotContains(t, second.out.String(), "rescued jobs", "the next start rescued jobs of a process that stopped cleanly")
	waitAllDone(t, pool, 4, 10*time.Second)
}

// The first SIGTERM waits for the step in flight; a second one exits at
// once with code 130.
func TestStartSecondSignalForcesExit(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	s, arrived := slowSink(t, time.Minute)
	config := writeConfig(t, fmt.Sprintf(slowProject, s.URL))
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	defer pool.Close()
	p := startRflowArgs(t, nil, "start", "-c", config, "--database-url", db, "--shutdown-timeout", "2m")
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), `msg="rflow started"`) }, 30*time.Second, 50*time.Millisecond)
	enqueueManual(t, pool, config, 1)
	require.Eventually(t, func() bool { return arrived.Load() >= 1 }, 20*time.Second, 50*time.Millisecond)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		t.Fatalf("the first SIGTERM did not wait for the step in flight; output:\n%s", p.out)
	case <-time.After(2 * time.Second):
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		t.Fatalf("a second signal did not force the exit; output:\n%s", p.out)
	}
	require.Equal(t, exitForced, p.cmd.ProcessState.ExitCode(), "output:\n%s", p.out)
	require.Contains(t, p.out.String(), "rflow: second interrupt (Ctrl-C): exiting now")
}

// rflow start on the embedded Postgres prints a database URL that works;
// read commands without --database-url attach to the running cluster, and a
// second start on it says who runs it.
func TestStartEmbeddedReadCommandsAttach(t *testing.T) {
	t.Parallel()
	dataHome := publicTempDir(t)
	project := filepath.Join(dataHome, "rflow.yaml")
	require.NoError(t, os.WriteFile(project, []byte(`
name: attach-check
workflows:
  - name: ping
    trigger: { manual: {} }
    steps:
      - id: done
        noop: {}
`), 0o644))
	env := append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME"), "XDG_DATA_HOME="+dataHome)
	var stdout, stderr syncBuffer
	cmd := exec.Command(rflowBin, "start", "-c", project)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	dbLine := regexp.MustCompile(`rflow: database (postgres://\S+) \(read commands`)
	var url string
	require.Eventually(t, func() bool {
		m := dbLine.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil && strings.Contains(stderr.String(), `msg="rflow started"`)
	}, 60*time.Second, 100*time.Millisecond, "stderr: %s", stderr.String())
	require.NotContains(t, url, "xxxxx", "the printed URL must be usable")

	rflow := func(args ...string) (string, error) {
		c := exec.Command(rflowBin, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := rflow("run", "ping", "-c", project, "--key", "k1")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		out, err := rflow("runs", "list", "-c", project, "-o", "json")
		return err == nil && strings.Contains(out, `"status": "completed"`)
	}, 20*time.Second, 200*time.Millisecond)
	out, err = rflow("workflows", "ls", "-c", project)
	require.NoError(t, err, out)
	require.Contains(t, out, "ping")
	out, err = rflow("--database-url", url, "runs", "list")
	require.NoError(t, err, "the printed URL: %s", out)
	require.Contains(t, out, "ping")

	out, err = rflow("start", "-c", project)
	require.Error(t, err)
	require.Contains(t, out, "the embedded postgres of project attach-check is already running")
	require.Contains(t, out, "--database-url "+url)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "stderr: %s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("rflow start did not exit within 15s of SIGTERM")
	}
	dataDir := filepath.Join(dataHome, "rflow", "attach-check", "data")
	require.Eventually(t, func() bool { return len(processesMentioning(t, dataDir)) == 0 }, 5*time.Second, 50*time.Millisecond,
		"postgres still running: %v", processesMentioning(t, dataDir))
}

// rflow dev fails before its banner when its --http port is taken.
func TestDevPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	for _, cmd := range []string{"dev", "start"} {
		args := []string{cmd, "--http", addr}
		if cmd == "start" {
			args = append(args, "-c", writeConfig(t, fmt.Sprintf(slowProject, "http://127.0.0.1:1")), "--database-url", "postgres://127.0.0.1:1/x")
		}
		c := exec.Command(rflowBin, args...)
		c.Env = append(withoutEnv(os.Environ(), "XDG_DATA_HOME"), "XDG_DATA_HOME="+t.TempDir())
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		require.Error(t, err)
		require.Equal(t, 1, c.ProcessState.ExitCode(), "%s: %s", cmd, stderr.String())
		require.Contains(t, stderr.String(), "port "+addr+" is in use; pass --http to choose another", cmd)
		require.NotContains(t, stdout.String(), "rflow dev", "the banner was printed")
		require.NoDirExists(t, filepath.Join(c.Env[len(c.Env)-1][len("XDG_DATA_HOME="):], "rflow"), "a database was created")
	}
}

// rflow dev deploys an edited workflow file as a new generation and says
// so; a file that does not validate is reported and the previous generation
// keeps running.
func TestDevReloadsEditedWorkflows(t *testing.T) {
	t.Parallel()
	dataHome := publicTempDir(t)
	var stdout, stderr syncBuffer
	cmd := exec.Command(rflowBin, "dev", "--http", "127.0.0.1:0", "--emit-every", "1s", "--chain", "simulated")
	cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME"), "XDG_DATA_HOME="+dataHome)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})
	filesLine := regexp.MustCompile(`files     (\S+) \(edit them`)
	var dir, url string
	require.Eventually(t, func() bool {
		f, d := filesLine.FindStringSubmatch(stdout.String()), bannerDatabase.FindStringSubmatch(stdout.String())
		if f != nil && d != nil {
			dir, url = f[1], d[1]
		}
		return dir != "" && strings.Contains(stdout.String(), "claimed")
	}, 60*time.Second, 100*time.Millisecond)

	file := filepath.Join(dir, "workflows", "deposits.yaml")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	v2 := strings.Replace(string(src), `text: "deposit ${{ trigger.key }}`, `text: "v2 deposit ${{ trigger.key }}`, 1)
	require.NotEqual(t, string(src), v2)
	require.NoError(t, os.WriteFile(file, []byte(v2), 0o644))
	require.Eventually(t, func() bool {
		return strings.Contains(stdout.String(), "reloaded workflows/deposits.yaml: workflow=on-deposit generation 2")
	}, 10*time.Second, 100*time.Millisecond)
	// New runs take the new generation: the view shows its notification.
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), `notify="v2 deposit `) },
		30*time.Second, 100*time.Millisecond)

	broken := strings.Replace(v2, "    notify:\n      webhook: ${RFLOW_DEV_ENDPOINT}/dev/notify\n      text: \"v2", "    notifyy:\n      webhook: ${RFLOW_DEV_ENDPOINT}/dev/notify\n      text: \"v2", 1)
	require.NotEqual(t, v2, broken)
	require.NoError(t, os.WriteFile(file, []byte(broken), 0o644))
	require.Eventually(t, func() bool {
		out := stdout.String()
		return strings.Contains(out, "not reloaded workflows/deposits.yaml (the previous generation keeps running)") &&
			strings.Contains(out, "deposits.yaml:")
	}, 10*time.Second, 100*time.Millisecond)
	out, err := exec.Command(rflowBin, "--database-url", url, "workflows", "ls", "-o", "json").CombinedOutput()
	require.NoError(t, err, string(out))
	var wfs []struct {
		Name       string `json:"name"`
		Generation int64  `json:"generation"`
	}
	require.NoError(t, json.Unmarshal(out, &wfs), string(out))
	require.Len(t, wfs, 1)
	require.Equal(t, int64(2), wfs[0].Generation, "a file that does not validate was deployed")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("rflow dev did not exit within 15s of SIGTERM")
	}

	// The edits outlive the session, in a folder beside the database.
	require.True(t, strings.HasPrefix(dir, filepath.Join(dataHome, "rflow", "quickstart")), dir)
	kept, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, broken, string(kept))
	// And `rflow runs list` finds the quickstart's runs with no -c, from
	// a directory with no rflow.yaml.
	list := exec.Command(rflowBin, "runs", "list", "--workflow", "on-deposit", "-o", "json")
	list.Dir = t.TempDir()
	list.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME"), "XDG_DATA_HOME="+dataHome)
	listed, err := list.Output()
	require.NoError(t, err, string(listed))
	var page struct {
		Runs []struct {
			Workflow string `json:"workflow"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(listed, &page), string(listed))
	require.NotEmpty(t, page.Runs)
	require.Equal(t, "on-deposit", page.Runs[0].Workflow)
}

// On a terminal, rflow start shows the live view (banner with the database
// URL, runs claimed and their steps) instead of log lines.
func TestStartLiveViewOnTerminal(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) gives the child a terminal; not installed")
	}
	db := storetest.URL(t)
	s := newSink(t)
	config := writeConfig(t, fmt.Sprintf(slowProject, s.URL))
	var out syncBuffer
	cmd := exec.Command(script, "-qfec", fmt.Sprintf("%s start -c %s --database-url '%s'", rflowBin, config, db), "/dev/null")
	cmd.Env = append(withoutEnv(os.Environ(), "TERM", "NO_COLOR"), "TERM=xterm")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), "rflow start") && strings.Contains(out.String(), "Watching runs")
	}, 30*time.Second, 100*time.Millisecond, "output: %s", out.String())
	require.Contains(t, out.String(), "database  "+db)
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	defer pool.Close()
	enqueueManual(t, pool, config, 1)
	require.Eventually(t, func() bool {
		o := out.String()
		return strings.Contains(o, "▸") && strings.Contains(o, "claimed") && strings.Contains(o, "✓") && strings.Contains(o, "completed")
	}, 20*time.Second, 100*time.Millisecond, "output: %s", out.String())
	require.NotContains(t, out.String(), "level=INFO", "log lines beside the live view")
}
