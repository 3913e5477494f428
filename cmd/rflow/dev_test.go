package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// TestDevRunsQuickstart runs `rflow dev` as a child process on a fresh
// XDG_DATA_HOME, waits for completed runs of the quickstart workflow (seen
// through `rflow runs list/show` against the dev database), sends SIGTERM,
// and checks that the process exits 0 within 10 s leaving no postgres and no
// chain behind. As root it runs twice: as root (the embedded Postgres then
// runs as an unprivileged user) and as user nobody; otherwise once, as the
// current user.
func TestDevRunsQuickstart(t *testing.T) {
	t.Parallel()
	bin := publicCopy(t, rflowBin)
	if os.Geteuid() == 0 {
		t.Run("AsRoot", func(t *testing.T) {
			t.Parallel()
			testDev(t, bin, devCase{backend: devchain.BackendSimulated})
		})
		nobody, err := user.Lookup("nobody")
		require.NoError(t, err, "running as root needs a nobody user for the non-root variant")
		uid, _ := strconv.Atoi(nobody.Uid)
		gid, _ := strconv.Atoi(nobody.Gid)
		t.Run("AsNobody", func(t *testing.T) {
			t.Parallel()
			testDev(t, bin, devCase{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, backend: devchain.BackendAuto})
		})
		return
	}
	t.Run("AsCurrentUser", func(t *testing.T) {
		t.Parallel()
		testDev(t, bin, devCase{backend: devchain.BackendAuto})
	})
}

// --database-url and --rpc switch rflow dev to your database and node: no
// embedded Postgres, the Emitter deployed on your node, which keeps running.
func TestDevWithYourDatabaseAndNode(t *testing.T) {
	t.Parallel()
	if _, err := anviltest.Binary(); err != nil {
		t.Skip(err)
	}
	node := anviltest.Start(t, anviltest.Options{BlockTime: time.Second})
	testDev(t, rflowBin, devCase{dbURL: storetest.URL(t), rpc: node.URL})
}

// publicCopy copies the rflow binary into a directory every user can enter,
// so a child running as nobody can execute it.
func publicCopy(t *testing.T, bin string) string {
	t.Helper()
	dir := publicTempDir(t)
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	p := filepath.Join(dir, "rflow")
	require.NoError(t, os.WriteFile(p, b, 0o755))
	return p
}

// publicTempDir is a fresh 0777 directory (t.TempDir's parents are 0700,
// which neither nobody nor the embedded Postgres's user can enter).
func publicTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rflow-dev-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o777))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// syncBuffer is a bytes.Buffer safe for a child's writes and our reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	bannerPostgres = regexp.MustCompile(`postgres  embedded, pid (\d+), data in (\S+)`)
	bannerDatabase = regexp.MustCompile(`database  (postgres://\S+)`)
	bannerConsole  = regexp.MustCompile(`console (http://\S+/ui/) \((?:log in with|opens without a login on this machine; API) token (\w+);`)
	bannerChain    = regexp.MustCompile(`chain     (\w+)(?: \(pid (\d+)\))?[^\n]*, chain id (\d+), (http://\S+)`)
)

// devCase is one way of running rflow dev in a test.
type devCase struct {
	cred    *syscall.Credential // run as this user (nil: as ourselves)
	backend string              // --chain
	dbURL   string              // --database-url (empty: embedded)
	rpc     string              // --rpc (empty: the dev chain)
}

func testDev(t *testing.T, bin string, dc devCase) {
	dataHome := publicTempDir(t)
	var stdout, stderr syncBuffer
	args := []string{"dev", "--http", "127.0.0.1:0", "--emit-every", "1s"}
	if dc.backend != "" {
		args = append(args, "--chain", dc.backend)
	}
	if dc.dbURL != "" {
		args = append([]string{"--database-url", dc.dbURL}, args...)
	}
	if dc.rpc != "" {
		args = append(args, "--rpc", dc.rpc)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dataHome
	cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME", "RFLOW_ANVIL"), "XDG_DATA_HOME="+dataHome)
	anvil, anvilErr := anviltest.Binary()
	if anvilErr == nil {
		cmd.Env = append(cmd.Env, "RFLOW_ANVIL="+anvil)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if dc.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: dc.cred}
		cmd.Env = append(cmd.Env, "HOME="+dataHome)
	}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("rflow dev stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})

	// The banner names the database (with the postgres pid and data
	// directory when embedded) and the chain.
	var pg, dbURL, ch []string
	require.Eventually(t, func() bool {
		out := stdout.String()
		pg, dbURL, ch = bannerPostgres.FindStringSubmatch(out), bannerDatabase.FindStringSubmatch(out), bannerChain.FindStringSubmatch(out)
		return (pg != nil || dc.dbURL != "") && dbURL != nil && ch != nil
	}, 60*time.Second, 100*time.Millisecond, "no banner")
	var pgPid int
	var dataDir string
	if dc.dbURL == "" {
		pgPid, _ = strconv.Atoi(pg[1])
		dataDir = pg[2]
		require.Equal(t, filepath.Join(dataHome, "rflow", "quickstart", "data"), dataDir)
	} else {
		require.Nil(t, pg, "an embedded postgres was started despite --database-url")
		require.Equal(t, dc.dbURL, dbURL[1])
	}
	chainPid, _ := strconv.Atoi(ch[2]) // 0 when the chain is in-process or yours
	chainURL := strings.TrimPrefix(ch[4], "http://")
	switch {
	case dc.rpc != "":
		require.Equal(t, "your", ch[1])
		require.Equal(t, dc.rpc, ch[4])
	case dc.backend == devchain.BackendSimulated:
		require.Equal(t, "simulated", ch[1])
	case anvilErr == nil: // auto, with anvil installed
		require.Equal(t, "anvil", ch[1])
		require.NotZero(t, chainPid)
	}

	// Completed runs, through the CLI against the dev database, until one
	// took every step: the http_call, both notifies and the send.
	var id string
	require.Eventually(t, func() bool {
		out, err := exec.Command(bin, "--database-url", dbURL[1], "runs", "list", "--workflow", "on-deposit",
			"--status", "completed", "-o", "json").Output()
		if err != nil {
			return false
		}
		var completed struct {
			Runs []struct {
				ID string `json:"id"`
			} `json:"runs"`
		}
		if json.Unmarshal(out, &completed) != nil {
			return false
		}
		for _, r := range completed.Runs {
			steps := runSteps(t, bin, dbURL[1], r.ID)
			require.Equal(t, "completed", steps["score"], "the http_call step of run %s", r.ID)
			require.Equal(t, "completed", steps["receipt"], "the notify step of run %s", r.ID)
			require.Contains(t, []string{"completed", "skipped"}, steps["thank"], "the send step of run %s", r.ID)
			if steps["large"] == "completed" && steps["thank"] == "completed" {
				id = r.ID
				return true
			}
		}
		return false
	}, 60*time.Second, 500*time.Millisecond, "no run of on-deposit completed all its steps within 60s")

	// The live view showed the run step by step, and the local endpoint got
	// its notification.
	require.Eventually(t, func() bool {
		out := stdout.String()
		return strings.Contains(out, "run="+id+" workflow=on-deposit claimed key=") &&
			strings.Contains(out, "run="+id+" workflow=on-deposit step=score completed") &&
			strings.Contains(out, "run="+id+" workflow=on-deposit completed") &&
			strings.Contains(out, `step=receipt completed`) && strings.Contains(out, "handled by run "+id)
	}, 5*time.Second, 100*time.Millisecond, "the live view did not show run %s", id)

	require.Contains(t, stdout.String(), "run="+id+" workflow=on-deposit step=thank completed")
	// runs show's table names the send's transaction.
	table, err := exec.Command(bin, "--database-url", dbURL[1], "runs", "show", id).Output()
	require.NoError(t, err)
	require.Regexp(t, `thank\s+send\s+completed\s.*tx 0x[0-9a-f]{64} confirmed`, string(table))

	// The printed console URL and token log in, and the run's journal is there.
	console := bannerConsole.FindStringSubmatch(stdout.String())
	require.NotNil(t, console, "rflow dev printed no console URL")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.PostForm(console[1]+"login", url.Values{"token": {console[2]}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	req, _ := http.NewRequest(http.MethodGet, console[1]+"runs/"+id, nil)
	req.AddCookie(res.Cookies()[0])
	res, err = noFollow.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(page), `data-step="score"`)
	require.Contains(t, string(page), `data-step="thank"`)

	// On its loopback address the console opens without a login for a
	// browser on this machine; a page of another site resolving to it
	// (DNS rebinding) is sent to the login, and the API still wants the
	// token.
	res, err = noFollow.Get(console[1])
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "a loopback browser logged in by itself")
	require.Len(t, res.Cookies(), 1, "a session cookie for the next pages and River UI")
	req, _ = http.NewRequest(http.MethodGet, console[1], nil)
	req.Host = "rebound.example:80"
	res, err = noFollow.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "another host name is not let in")
	res, err = http.Get(strings.TrimSuffix(console[1], "/ui/") + "/v1/runs")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "the API still needs the token")

	// SIGTERM stops everything within 10 s.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "rflow dev did not exit 0")
	case <-time.After(10 * time.Second):
		t.Fatal("rflow dev did not exit within 10s of SIGTERM")
	}
	require.NotContains(t, stderr.String(), "level=ERROR")
	if dataDir != "" {
		require.Eventually(t, func() bool { return gone(pgPid) }, 2*time.Second, 50*time.Millisecond, "postgres (pid %d) still running", pgPid)
		require.Empty(t, processesMentioning(t, dataDir), "processes still use the data directory")
		require.NoFileExists(t, filepath.Join(dataDir, "postmaster.pid"), "postgres did not shut down cleanly")
	}
	if chainPid != 0 {
		require.Eventually(t, func() bool { return gone(chainPid) }, 2*time.Second, 50*time.Millisecond, "anvil (pid %d) still running", chainPid)
	}
	conn, err := net.DialTimeout("tcp", chainURL, time.Second)
	if err == nil {
		conn.Close()
	}
	if dc.rpc != "" {
		require.NoError(t, err, "rflow dev stopped a node it did not start")
	} else {
		require.Error(t, err, "the chain still answers on %s", chainURL)
	}
}

// runSteps returns the status of each step of a run, from rflow runs show.
func runSteps(t *testing.T, bin, dbURL, id string) map[string]string {
	t.Helper()
	out, err := exec.Command(bin, "--database-url", dbURL, "runs", "show", id, "-o", "json").Output()
	require.NoError(t, err)
	var detail struct {
		TriggerKind string `json:"trigger_kind"`
		Steps       []struct {
			Key    string `json:"step_key"`
			Status string `json:"status"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(out, &detail))
	require.Equal(t, "event", detail.TriggerKind)
	steps := map[string]string{}
	for _, s := range detail.Steps {
		steps[s.Key] = s.Status
	}
	return steps
}

// gone reports whether no process has pid.
func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

// processesMentioning lists the pids whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if cmdline := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmdline, s) {
			found = append(found, fmt.Sprintf("%s: %s", e.Name(), cmdline))
		}
	}
	return found
}

func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		drop := false
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				drop = true
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// rflow start without a database URL runs the same embedded Postgres, says
// where its data lives and that a database URL is the production setting,
// and stops it on SIGTERM.
func TestStartEmbeddedPostgresSaysWhereDataLives(t *testing.T) {
	t.Parallel()
	dataHome := publicTempDir(t)
	project := filepath.Join(dataHome, "rflow.yaml")
	require.NoError(t, os.WriteFile(project, []byte(`
name: embedded-check
workflows:
  - name: ping
    trigger: { manual: {} }
    steps:
      - id: done
        noop: {}
`), 0o644))
	var stdout, stderr syncBuffer
	cmd := exec.Command(rflowBin, "start", "-c", project)
	cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME"), "XDG_DATA_HOME="+dataHome)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	dataDir := filepath.Join(dataHome, "rflow", "embedded-check", "data")
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), "embedded postgres, data in "+dataDir+" (for production, set --database-url / DATABASE_URL)")
	}, 60*time.Second, 100*time.Millisecond, "stderr: %s", stderr.String())
	require.Eventually(t, func() bool { return len(processesMentioning(t, dataDir)) > 0 }, 10*time.Second, 50*time.Millisecond)
	require.FileExists(t, filepath.Join(dataDir, "PG_VERSION"))
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), `msg="rflow started"`) },
		60*time.Second, 100*time.Millisecond, "stderr: %s", stderr.String())

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "stderr: %s", stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("rflow start did not exit within 10s of SIGTERM")
	}
	require.Eventually(t, func() bool { return len(processesMentioning(t, dataDir)) == 0 }, 2*time.Second, 50*time.Millisecond,
		"postgres still running: %v", processesMentioning(t, dataDir))
}

func TestDevViewFormats(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("01a22c94-2585-7a9f-98eb-7e207ec38c27")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done := at.Add(250 * time.Millisecond)
	run := &store.Run{ID: id, Workflow: "on-deposit", TriggerKey: "1337:0xabc:0", Status: store.RunCompleted,
		CreatedAt: at, UpdatedAt: done, FinishedAt: &done}
	started, finished := at.Add(10*time.Millisecond), at.Add(14*time.Millisecond)
	step := &store.StepRun{RunID: id, Key: "score", Status: store.StepCompleted, CreatedAt: at, StartedAt: &started, FinishedAt: &finished}
	boom := "POST http://x/dev/echo: unexpected status 500"
	failed := &store.StepRun{RunID: id, Key: "large", Status: store.StepFailed, CreatedAt: at, FinishedAt: &finished, Error: &boom}

	var plain bytes.Buffer
	v := newDevView(&plain)
	require.False(t, v.tty, "a buffer is not a terminal")
	v.notify(id.String()+":score", "hello")
	v.claimed(run)
	v.step(run, step)
	v.step(run, failed)
	v.runStatus(run)
	require.Equal(t, strings.Join([]string{
		"03:04:05.000 run=" + id.String() + " workflow=on-deposit claimed key=1337:0xabc:0",
		"03:04:05.014 run=" + id.String() + ` workflow=on-deposit step=score completed took=4ms notify="hello"`,
		"03:04:05.014 run=" + id.String() + ` workflow=on-deposit step=large failed error="` + boom + `"`,
		"03:04:05.250 run=" + id.String() + " workflow=on-deposit completed took=250ms",
	}, "\n")+"\n", plain.String())
	require.NotContains(t, plain.String(), "\x1b[", "no escape codes off a terminal")

	var tidy bytes.Buffer
	v = &devView{w: &tidy, tty: true}
	v.notify(id.String()+":score", "hello")
	v.claimed(run)
	v.step(run, step)
	v.step(run, failed)
	v.runStatus(run)
	out := tidy.String()
	require.Contains(t, out, "▸")
	require.Contains(t, out, "7ec38c27")
	require.NotContains(t, out, id.String(), "a terminal gets short run ids")
	require.Contains(t, out, "✓")
	require.Contains(t, out, "✗")
	require.Contains(t, out, "in 250ms")
	require.Contains(t, out, "✉")
	require.Contains(t, out, "hello")
	require.Equal(t, 5, strings.Count(out, "\n"))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		require.Contains(t, l, "on-deposit", "every line names its workflow")
		require.Contains(t, l, "7ec38c27", "every line names its run")
	}
}

// Held and waiting runs say so, and until when; reorgs and on_reorg
// responses are lines of the view.
func TestDevViewHeldWaitingAndReorgs(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("01a22c94-2585-7a9f-98eb-7e207ec38c27")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wake := at.Add(5 * time.Second)
	held := &store.Run{ID: id, Workflow: "saga", Status: store.RunThrottled, CreatedAt: at, UpdatedAt: at, WakeAt: &wake}
	limited := &store.Run{ID: id, Workflow: "limited", Status: store.RunThrottled, CreatedAt: at, UpdatedAt: at, WakeAt: &wake}
	delayed := &store.Run{ID: id, Workflow: "saga", Status: store.RunWaitingDelay, CreatedAt: at, UpdatedAt: at, WakeAt: &wake}
	resp := &store.Response{ID: uuid.MustParse("01a22c94-2585-7a9f-98eb-7e2000000002"), RunID: id, ForkBlock: 41, DecideAt: 43,
		Status: store.RunPending, UpdatedAt: at}
	p := &workflow.Project{
		Networks:  []*workflow.Network{{Name: "local", ChainID: 31337}},
		Workflows: []*workflow.Workflow{{Name: "saga", Throttle: &workflow.Throttle{Max: 1, Per: time.Minute}}, {Name: "limited", RateLimit: &workflow.RateLimit{Max: 1, Per: time.Minute}}},
	}
	show := func(v *devView) {
		v.useProject(p)
		v.held(held)
		v.held(limited)
		v.runStatus(delayed)
		v.reorg(store.ReorgEvent{ChainID: 31337, ForkBlock: 41, Depth: 2, OrphanedRuns: 1, DetectedAt: at})
		v.response(held, resp)
	}
	var plain bytes.Buffer
	show(newDevView(&plain))
	require.Equal(t, strings.Join([]string{
		"03:04:05.000 run=" + id.String() + ` workflow=saga throttled guard="throttled" until=2026-01-02T03:04:10Z`,
		"03:04:05.000 run=" + id.String() + ` workflow=limited throttled guard="rate-limited" until=2026-01-02T03:04:10Z`,
		"03:04:05.000 run=" + id.String() + " workflow=saga waiting_delay until=2026-01-02T03:04:10Z",
		"03:04:05.000 reorg network=local chain_id=31337 fork_block=41 depth=2 orphaned_runs=1",
		"03:04:05.000 run=" + id.String() + " workflow=saga on_reorg=" + resp.ID.String() + " status=pending fork_block=41 decide_at=43",
	}, "\n")+"\n", plain.String())

	var tidy bytes.Buffer
	show(&devView{w: &tidy, tty: true})
	out := regexp.MustCompile("\x1b\\[[0-9;]*[a-zA-Z]").ReplaceAllString(tidy.String(), "")
	wakeLocal := wake.Local().Format("15:04:05")
	require.Contains(t, out, "⏸ throttled until "+wakeLocal)
	require.Contains(t, out, "⏸ rate-limited until "+wakeLocal)
	require.Contains(t, out, "⏸ waiting: delay until "+wakeLocal)
	require.Contains(t, out, "⚠ reorg on local at block 41: 2 block(s) replaced, 1 run(s) orphaned")
	require.Contains(t, out, "orphaned by the reorg at block 41; on_reorg decides at block 43")
}

// TestDevViewApprovalHint: a pending approval is shown with its summary and
// the commands that decide it.
func TestDevViewApprovalHint(t *testing.T) {
	t.Parallel()
	ap := &store.Approval{ID: uuid.MustParse("01a22c94-2585-7a9f-98eb-7e2000000001"), RunID: uuid.New(), StepKey: "pay",
		Summary:   []byte(`{"network":"local","wallet":"ops","to":"0x000000000000000000000000000000000000dEaD","value":"7"}`),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	run := &store.Run{ID: ap.RunID, Workflow: "payout"}
	var plain bytes.Buffer
	newDevView(&plain).approvalWaiting(run, ap)
	require.Contains(t, plain.String(), `approve="rflow approve 00000001"`)
	require.Contains(t, plain.String(), `summary="send 0.000000000000000007 ETH (7 wei) to 0x000000000000000000000000000000000000dEaD from ops on local"`)
	var tidy bytes.Buffer
	(&devView{w: &tidy, tty: true}).approvalWaiting(run, ap)
	require.Contains(t, tidy.String(), "rflow approve 00000001 | reject: rflow reject 00000001 --reason R")
}

// Flag mistakes are usage errors, reported before anything starts.
func TestDevUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "extra"}, "dev takes no arguments"},
		{[]string{"dev", "--contract", "0x5FbDB2315678afecb367f032d93F642f64180aa3"}, "--contract needs --rpc"},
		{[]string{"dev", "--rpc", "http://127.0.0.1:1", "--contract", "nope"}, `--contract "nope" is not an address`},
		{[]string{"dev", "--emit-every", "0s"}, "--emit-every must be positive"},
		{[]string{"dev", "--chain", "hardhat"}, `--chain "hardhat": use auto, simulated or anvil`},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run(append([]string{"rflow"}, tc.args...), &out, &errOut), "%v", tc.args)
		require.Contains(t, errOut.String(), tc.want, "%v", tc.args)
	}
}

// Only a loopback address opens the dev console without a login: bound to
// every interface it asks for the token, from this machine too.
func TestDevLoopbackLoginOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	local, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer local.Close()
	all, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer all.Close()
	require.True(t, loopback(local))
	require.False(t, loopback(all), "every interface is not loopback")
	require.False(t, loopback(nil))
	tok := devToken{value: "abc", generated: true}
	require.Equal(t, "opens without a login on this machine; API token abc; set RFLOW_API_TOKEN to choose one", tok.hint(true))
	require.Equal(t, "log in with token abc; set RFLOW_API_TOKEN to choose one", tok.hint(false))
}
