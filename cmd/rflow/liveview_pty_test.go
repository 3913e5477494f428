package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/store/storetest"
)

// overlapProject is a dev project whose runs overlap: the dev chain emits
// faster than a run ends (a delay), and a throttle holds runs back.
const overlapProject = `
name: overlap
networks:
  - name: dev
    chain_id: ${RFLOW_DEV_CHAIN_ID}
    rpc: ${RFLOW_DEV_RPC}
    confirmations: 1
    block_poll_interval: 250ms
contracts:
  - name: Emitter
    abi: ./abis/Emitter.json
    network: dev
    address: ${RFLOW_DEV_CONTRACT}
    start_block: ${RFLOW_DEV_START_BLOCK}
workflows:
  - name: saga
    trigger:
      event: { contract: Emitter, event: Deposit }
    throttle: { max: 2, per: 4s }
    steps:
      - id: claimed
        http_call: { method: POST, url: "${RFLOW_DEV_ENDPOINT}/dev/echo", body: { amount: "${{ event.amount }}" } }
      - id: pause
        delay: 1500ms
      - id: settled
        notify: { webhook: "${RFLOW_DEV_ENDPOINT}/dev/notify", text: "settled ${{ trigger.key }}" }
`

var (
	ansiEscape = regexp.MustCompile("\x1b\\[[0-9;?]*[a-zA-Z]")
	// A run's line on a terminal: time, workflow, short id, mark.
	ttyRunLine = regexp.MustCompile(`^\d\d:\d\d:\d\d saga ([0-9a-f]{8}) (\S+)`)
)

// startOnPTY runs rflow with args on a pseudo-terminal of 40x160 (env
// added to the environment, without DATABASE_URL and NO_COLOR) and
// collects what it writes there.
func startOnPTY(t *testing.T, env []string, args ...string) *syncBuffer {
	t.Helper()
	cmd := exec.Command(rflowBin, args...)
	cmd.Env = append(append(withoutEnv(os.Environ(), "DATABASE_URL", "NO_COLOR"), "TERM=xterm"), env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); tty.Close() })
	raw := &syncBuffer{}
	go func() {
		r := bufio.NewReader(tty)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			_, _ = raw.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	return raw
}

// screenLines is what a terminal was sent, as lines without escape codes
// (each redraw of the panel is there again).
func screenLines(raw *syncBuffer) []string {
	return strings.Split(ansiEscape.ReplaceAllString(strings.ReplaceAll(raw.String(), "\r", ""), ""), "\n")
}

// TestLiveViewOnATerminal runs `rflow dev` on a pseudo-terminal with runs
// that overlap and wait for a throttle: every line of a run names its
// workflow and short id, throttled and delayed runs say so, and the status
// panel (network head, runs, console) is drawn and redrawn in place. The
// same project without a terminal prints plain lines with no escape codes.
func TestLiveViewOnATerminal(t *testing.T) {
	t.Parallel()
	dir := publicTempDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj", "abis"), 0o755))
	abi, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "abis", "Emitter.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proj", "abis", "Emitter.json"), abi, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proj", "rflow.yaml"), []byte(overlapProject), 0o644))

	raw := startOnPTY(t, []string{"XDG_DATA_HOME=" + filepath.Join(dir, "data")}, "dev", "--project", filepath.Join(dir, "proj"),
		"--http", "127.0.0.1:0", "--emit-every", "400ms", "--chain", devchain.BackendSimulated)

	// Enough to see overlapping runs, a throttle and a delay.
	deadline := time.Now().Add(150 * time.Second)
	var lines []string
	for {
		lines = screenLines(raw)
		text := strings.Join(lines, "\n")
		if strings.Count(text, "⏸ throttled until ") >= 1 && strings.Count(text, "✓ completed") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no throttled and completed runs on the terminal; got:\n%s", text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out := raw.String()

	require.Contains(t, out, "\x1b[J", "the panel is erased before each line and drawn again")
	text := strings.Join(lines, "\n")
	require.Regexp(t, `── rflow dev overlap ── \d\d:\d\d:\d\d ──`, text)
	require.Regexp(t, `dev +head \d+ \(\d+s old\), (in sync|\d+ block\(s\) behind)`, text)
	require.Regexp(t, `runs +\d+ running, \d+ waiting( \(\d+ throttled\))?, \d+ failed, \d+ completed`, text)
	require.Regexp(t, `console +http://127\.0\.0\.1:\d+/ui/`, text)
	require.Regexp(t, `⏸ throttled until \d\d:\d\d:\d\d`, text)
	require.Regexp(t, `⏸ waiting: delay`, text)

	// Every step line names its run; runs overlap: a run's lines are
	// interleaved with another's.
	runsSeen := map[string]bool{}
	var order []string
	for _, l := range lines {
		if !strings.Contains(l, " claimed ") && !strings.Contains(l, "pause") && !strings.Contains(l, "settled") &&
			!strings.Contains(l, "✓ completed") && !strings.Contains(l, "⏸") {
			continue
		}
		if strings.HasPrefix(l, "──") || strings.HasPrefix(l, "runs ") {
			continue
		}
		m := ttyRunLine.FindStringSubmatch(l)
		require.NotNil(t, m, "a run's line without its workflow and short id: %q", l)
		runsSeen[m[1]] = true
		order = append(order, m[1])
	}
	require.GreaterOrEqual(t, len(runsSeen), 3, text)
	interleaved := false // some run's lines have another run's between them
	last := map[string]int{}
	for i, id := range order {
		if j, ok := last[id]; ok && j < i-1 {
			interleaved = true
		}
		last[id] = i
	}
	require.True(t, interleaved, "runs did not overlap: %v\n%s", order, text)
}

// Without a terminal the same view is plain key=value lines: no escape
// codes, no panel.
func TestLiveViewWithoutATerminal(t *testing.T) {
	t.Parallel()
	dir := publicTempDir(t)
	var out syncBuffer
	cmd := exec.Command(rflowBin, "dev", "--http", "127.0.0.1:0", "--emit-every", "500ms", "--chain", devchain.BackendSimulated)
	cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL"), "XDG_DATA_HOME="+dir, "TERM=xterm")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { return completedRun.MatchString(out.String()) }, 120*time.Second, 100*time.Millisecond,
		"no completed run")
	time.Sleep(1500 * time.Millisecond) // a panel refresh, if there were one
	require.NotContains(t, out.String(), "\x1b", "no escape codes off a terminal")
	require.NotContains(t, out.String(), "── rflow dev")
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, " step=") {
			require.Regexp(t, `run=\S+ workflow=on-deposit step=`, l)
		}
	}
}

const reorgViewProject = `
name: reorgview
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 2, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: credit
    trigger:
      event: { contract: Vault, event: Deposit, run_on: head }
    steps:
      - id: act
        http_call: { method: POST, url: "%[3]s/act" }
    on_reorg:
      - id: undo
        http_call: { method: POST, url: "%[3]s/undo" }
`

// A reorg under `rflow start` on a terminal is a line of the live view,
// and so is the on_reorg response it starts, from start to end; the
// engine's reorg WARNs are not repeated beside them.
func TestLiveViewShowsReorgs(t *testing.T) {
	t.Parallel()
	if _, err := anviltest.Binary(); err != nil {
		t.Skip(err)
	}
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	s := newSink(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(reorgViewProject, node.URL, em.Address.Hex(), s.URL)), 0o644))
	raw := startOnPTY(t, nil, "--database-url", storetest.URL(t), "start", "-c", config, "--http", "127.0.0.1:0")

	waitScreen := func(what string, re *regexp.Regexp) {
		t.Helper()
		require.Eventually(t, func() bool { return re.MatchString(strings.Join(screenLines(raw), "\n")) },
			90*time.Second, 100*time.Millisecond, "%s; screen:\n%s", what, strings.Join(screenLines(raw), "\n"))
	}
	em.Deposit(5)
	waitScreen("the run completed", regexp.MustCompile(`credit [0-9a-f]{8} ✓ completed`))
	time.Sleep(time.Second) // the window reaches the tip
	node.Reorg(1)
	stop := make(chan struct{})
	mined := make(chan struct{})
	go func() { // the fork reaches the network's depth
		defer close(mined)
		for {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
				node.Call(nil, "anvil_mine", hexutil.Uint64(1))
			}
		}
	}()
	defer func() { close(stop); <-mined }()
	waitScreen("the reorg line", regexp.MustCompile(`\d\d:\d\d:\d\d ⚠ reorg on local at block \d+: 1 block\(s\) replaced, 1 run\(s\) orphaned`))
	waitScreen("the response's start", regexp.MustCompile(`credit [0-9a-f]{8} (↺ orphaned by the reorg at block \d+|↺ on_reorg started)`))
	waitScreen("the response's end", regexp.MustCompile(`credit [0-9a-f]{8} ✓ on_reorg completed`))
	require.NotContains(t, strings.Join(screenLines(raw), "\n"), "msg=reorg", "the view's line, not the WARN")
	require.NotContains(t, strings.Join(screenLines(raw), "\n"), "on_reorg response started\"", "the view's line, not the WARN")
}
