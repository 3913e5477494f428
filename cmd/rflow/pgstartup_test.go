package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
)

const pgStartupProject = `
name: pgstartup
networks:
  - { name: local, chain_id: 31337, rpc: "%s", confirmations: 1, block_poll_interval: 200ms }
workflows:
  - name: hello
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "%s/hello" } }
`

// heldRPC proxies JSON-RPC to a real node, and holds every request until
// release is called: a start-up that asks its node for the chain id (before
// it touches the database) waits there.
type heldRPC struct {
	*httptest.Server
	once    sync.Once
	held    chan struct{} // closed when the first request is waiting
	release chan struct{}
	first   sync.Once
}

func newHeldRPC(t *testing.T, node string) *heldRPC {
	t.Helper()
	target, err := url.Parse(node)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	// A request the stopping process gave up on is not news.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	h := &heldRPC{held: make(chan struct{}), release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.first.Do(func() { close(h.held) })
		<-h.release
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { h.let(); h.Close() })
	return h
}

func (h *heldRPC) let() { h.once.Do(func() { close(h.release) }) }

// startHeldAtStartUp starts `rflow start` on embedded defaults, its start-up
// held at its first question to its node (before any query), and returns
// the process, the node's gate and the embedded data directory.
func startHeldAtStartUp(t *testing.T, sinkURL string) (p *proc, rpc *heldRPC, config, data string) {
	t.Helper()
	node := anviltest.Start(t, anviltest.Options{BlockTime: time.Second})
	rpc = newHeldRPC(t, node.URL)
	dir := publicTempDir(t)
	config = filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(pgStartupProject, rpc.URL, sinkURL)), 0o644))
	env := []string{"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "DATABASE_URL="}
	p = startRflowArgs(t, env, "--log-level", "warn", "start", "-c", config)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rflow start said:\n%s", p.out)
		}
	})
	select {
	case <-rpc.held:
	case <-time.After(120 * time.Second):
		t.Fatalf("start-up never asked its node; output:\n%s", p.out)
	}
	// Its banner is on its way through the pipe.
	dataDir := regexp.MustCompile(`embedded postgres, data in (\S+)`)
	require.Eventually(t, func() bool { return dataDir.MatchString(p.out.String()) }, 10*time.Second, 20*time.Millisecond,
		"no embedded postgres; output:\n%s", p.out)
	return p, rpc, config, dataDir.FindStringSubmatch(p.out.String())[1]
}

// killPostmaster kill -9s the embedded Postgres whose data is in data.
func killPostmaster(t *testing.T, data string) {
	t.Helper()
	pidFile, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// TestStartSurvivesPostgresDyingAtStartUp: the embedded Postgres of `rflow
// start` is killed (kill -9) while the process starts up, before its first
// query. The start-up waits for the supervisor to bring it back, says so
// in one line, starts again, and works runs; no stack of errors.
func TestStartSurvivesPostgresDyingAtStartUp(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	p, rpc, config, data := startHeldAtStartUp(t, s.URL)
	killPostmaster(t, data)
	rpc.let() // the start-up goes on, into a dead database

	url := regexp.MustCompile(`database (postgres://\S+)`).FindStringSubmatch(p.out.String())[1]
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", url, "workflows", "ls", "-o", "json")
		return code == 0 && strings.Contains(out, `"hello"`)
	}, 60*time.Second, 200*time.Millisecond, "the start-up never came through")
	out, stderr, code := rflowCmd(t, "--database-url", url, "run", "hello", "-c", config, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &started), out)
	require.Eventually(t, func() bool { return s.counts()[started.RunID+":call"] == 1 }, 60*time.Second, 100*time.Millisecond,
		"the run was not worked after the start-up outage")

	said := p.out.String()
	require.Contains(t, said, "rflow: postgres down: embedded postgres exited (signal: killed); restarting it")
	require.Contains(t, said, "rflow: postgres back: pid ")
	require.Regexp(t, `(?m)^rflow: start-up interrupted: the embedded postgres went down; starting again \(attempt 2 of \d+\)$`, said)
	// Between the down line and the start-up's retry, only state changes.
	outage := said[strings.Index(said, "rflow: postgres down"):]
	outage = outage[:strings.Index(outage, "starting again")]
	for _, l := range strings.Split(strings.TrimSpace(outage), "\n") {
		require.Regexp(t, `^rflow: (postgres (down|restarting|back)|start-up interrupted)`, l, "only state changes:\n%s", said)
	}
	p.stop(t)
}

// TestStartUpEndsInOneLineWhenPostgresStaysDown: killed at start-up with a
// data directory that no longer starts, the embedded Postgres does not come
// back; rflow start exits 1 with the supervisor's one line, after one line
// per state change.
func TestStartUpEndsInOneLineWhenPostgresStaysDown(t *testing.T) {
	t.Parallel()
	p, rpc, _, data := startHeldAtStartUp(t, "http://127.0.0.1:1")
	require.NoError(t, os.WriteFile(filepath.Join(data, "postgresql.conf"), []byte("not = = a config\n"), 0o600))
	killPostmaster(t, data)
	rpc.let()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("rflow start did not give up; output:\n%s", p.out)
	}
	require.Equal(t, 1, p.cmd.ProcessState.ExitCode(), p.out.String())
	said := strings.TrimSpace(p.out.String())
	lines := strings.Split(said[strings.Index(said, "rflow: postgres down"):], "\n")
	require.Len(t, lines, 8, "down, 6 restarts, the exit line; got:\n%s", said)
	for _, l := range lines[1:7] {
		require.Contains(t, l, "rflow: postgres restarting (attempt ", "only state changes; got:\n%s", said)
	}
	require.Regexp(t, `^rflow: embedded postgres is down and did not come back after 6 restarts: .*; stopping \(data in `, lines[7])
}
