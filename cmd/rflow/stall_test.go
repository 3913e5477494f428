package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/store/storetest"
)

const stallProject = `
name: stalls
networks:
  - { name: local, chain_id: 31337, rpc: %s, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Emitter, abi: ./Emitter.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
%s`

const depositWorkflow = `
  - name: on-deposit
    trigger: { event: { contract: Emitter, event: Deposit } }
    steps:
      - { id: noop, noop: {} }
`

// Only a wait feed reads logs: no trigger watches Claimed.
const awaitWorkflow = `
  - name: await-claim
    trigger: { manual: {} }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Emitter, event: Claimed }
          timeout: 1h
`

func writeStallProject(t *testing.T, rpc, workflows string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Emitter.json"), anviltest.EmitterABIJSON(t), 0o644))
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(stallProject, rpc, workflows)), 0o644))
	return path
}

// stallRflow runs `rflow start --http` (with extra flags) with a short
// --ready-stall and waits until it is ready.
func stallRflow(t *testing.T, dbURL, config string, extra ...string) (*proc, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	args := append([]string{"--database-url", dbURL, "--log-level", "warn",
		"start", "-c", config, "--http", addr, "--ready-stall", "3s"}, extra...)
	p := startRflowArgs(t, nil, args...)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		code, _ := readyz(base)
		return code == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "never ready; output:\n%s", p.out)
	return p, base
}

// readyz returns /readyz's status and its error object (nil when ready).
func readyz(base string) (int, map[string]any) {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error map[string]any `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error
}

// metric returns the value of the first sample of name whose labels
// contain every one of labels (`key="value"`), scraped from /metrics.
func metric(t *testing.T, base, name string, labels ...string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, line)
		return v, true
	}
	return 0, false
}

// headStall waits until base's /readyz fails with head_stalled and returns
// its one stalled head.
func headStall(t *testing.T, p *proc, base string) map[string]any {
	t.Helper()
	var stalled map[string]any
	require.Eventually(t, func() bool {
		code, e := readyz(base)
		if code != http.StatusServiceUnavailable || e["code"] != "head_stalled" {
			return false
		}
		stalled = e
		return true
	}, 30*time.Second, 200*time.Millisecond, "readiness never failed with the head stalled; output:\n%s", p.out)
	require.Contains(t, stalled["message"], "network local (chain 31337): no new block for")
	heads := stalled["details"].(map[string]any)["heads"].([]any)
	require.Len(t, heads, 1)
	h := heads[0].(map[string]any)
	require.Equal(t, "head/31337", h["task"])
	require.Equal(t, "local", h["network"])
	require.GreaterOrEqual(t, h["stalled_seconds"].(float64), 3.0)
	return h
}

func awaitReady(t *testing.T, p *proc, base string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		code, _ := readyz(base)
		return code == http.StatusOK
	}, within, 200*time.Millisecond, "not ready again; output:\n%s", p.out)
}

// A node that answers but stops producing blocks, then a frozen node
// (SIGSTOP: connections accepted, nothing answered), fail readiness within
// --ready-stall, naming the network's head tracker, its network, how long
// and why, while rflow_chain_head_age_seconds grows; when the node moves
// again rflow is ready. A second, --workers-only process that holds none of
// the leases reports the same, from what the holder wrote to the database.
func TestReadyzFailsWhileNodeIsFrozen(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{BlockTime: time.Second})
	dbURL := storetest.URL(t)
	config := writeStallProject(t, strconv.Quote(node.URL), depositWorkflow)
	p, base := stallRflow(t, dbURL, config)
	w, wbase := stallRflow(t, dbURL, config, "--workers-only")
	require.Eventually(t, func() bool {
		age, ok := metric(t, base, "rflow_chain_head_age_seconds", `network="local"`, `chain_id="31337"`)
		return ok && age < 3
	}, 30*time.Second, 200*time.Millisecond, "a fresh head; output:\n%s", p.out)

	// The node answers, but mines no more blocks.
	node.Call(nil, "evm_setIntervalMining", 0)
	h := headStall(t, p, base)
	require.Equal(t, "node_not_advancing", h["cause"], "%v", h)
	holder := h["holder"]
	require.NotEmpty(t, holder)
	h = headStall(t, w, wbase)
	require.Equal(t, "node_not_advancing", h["cause"], "%v", h)
	require.Equal(t, holder, h["holder"], "the workers-only process names the holder")
	node.Call(nil, "evm_setIntervalMining", 1)
	awaitReady(t, p, base, 30*time.Second)
	awaitReady(t, w, wbase, 30*time.Second)

	node.Freeze()
	frozen := true
	defer func() {
		if frozen {
			node.Thaw()
		}
	}()
	h = headStall(t, p, base)
	require.Equal(t, "node_unreachable", h["cause"], "polls hang: %v", h)
	require.Equal(t, true, h["lease_live"], "the tracker still holds its lease; it is the node that does not answer")
	require.Equal(t, "node_unreachable", headStall(t, w, wbase)["cause"])

	first, ok := metric(t, base, "rflow_chain_head_age_seconds", `network="local"`)
	require.True(t, ok)
	time.Sleep(6 * time.Second) // past the gauges' 5 s cache
	later, _ := metric(t, base, "rflow_chain_head_age_seconds", `network="local"`)
	require.Greater(t, later, first+4, "the head's age grows while the node is frozen")
	poll, ok := metric(t, wbase, "rflow_chain_head_poll_age_seconds", `network="local"`)
	require.True(t, ok)
	require.Greater(t, poll, 5.0, "the node has not answered a poll")

	node.Thaw()
	frozen = false
	awaitReady(t, p, base, 90*time.Second)
	awaitReady(t, w, wbase, 30*time.Second)
	w.stop(t)
	p.stop(t)
}

// A wait feed whose log reads fail while the head moves is a stall: it
// shows in rflow_wait_feed_lag_blocks and fails readiness naming the feed's
// task and network; once reads work again it catches up and rflow is ready.
func TestReadyzFailsWhileWaitFeedCannotRead(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{BlockTime: time.Second})
	proxy := rpcproxy.Start(t, node.URL)
	p, base := stallRflow(t, storetest.URL(t), writeStallProject(t, strconv.Quote(proxy.URL), awaitWorkflow))
	feed := `address="0x5fbdb2315678afecb367f032d93f642f64180aa3"`
	require.Eventually(t, func() bool {
		_, ok := metric(t, base, "rflow_wait_feed_lag_blocks", feed, `chain_id="31337"`)
		return ok
	}, 30*time.Second, 200*time.Millisecond, "the wait feed's lag; output:\n%s", p.out)

	proxy.Set(rpcproxy.Faults{Refuse: map[string]string{"eth_getLogs": "logs are unavailable on this node"}})
	var stalled map[string]any
	require.Eventually(t, func() bool {
		code, e := readyz(base)
		if code != http.StatusServiceUnavailable || e["code"] != "trigger_stalled" {
			return false
		}
		stalled = e
		return true
	}, 40*time.Second, 200*time.Millisecond, "readiness never failed with the feed's reads failing; output:\n%s", p.out)
	tasks := stalled["details"].(map[string]any)["stalled"].([]any)
	require.Len(t, tasks, 1, "%v", stalled)
	task := tasks[0].(map[string]any)
	require.Regexp(t, `^wait/31337/0x5fbdb2315678afecb367f032d93f642f64180aa3/0x[0-9a-f]{64}$`, task["task"])
	require.Equal(t, "local", task["network"])
	require.GreaterOrEqual(t, task["stalled_seconds"].(float64), 3.0)
	require.Contains(t, stalled["message"], "on network local")
	require.Empty(t, stalled["details"].(map[string]any)["heads"], "the head moves")
	require.Eventually(t, func() bool {
		lag, _ := metric(t, base, "rflow_wait_feed_lag_blocks", feed)
		return lag >= 3
	}, 30*time.Second, 500*time.Millisecond, "the feed's lag in blocks grows")

	proxy.Set(rpcproxy.Faults{})
	awaitReady(t, p, base, 60*time.Second)
	p.stop(t)
}

// blackHole accepts TCP connections and never answers on them.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// A first RPC URL that accepts connections and never answers costs start-up
// about a second, not a call timeout per start-up check: every URL is probed
// at once and the one that answers goes first, for ingestion too.
func TestStartSkipsRPCThatNeverAnswers(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	hole := blackHole(t)
	config := writeStallProject(t, fmt.Sprintf("[%q, %q]", hole, node.URL), depositWorkflow)
	dbURL := storetest.URL(t)
	began := time.Now()
	p := startRflowArgs(t, nil, "--database-url", dbURL, "--log-level", "info", "start", "-c", config)
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "rflow started") },
		30*time.Second, 20*time.Millisecond, "output:\n%s", p.out)
	took := time.Since(began)
	require.Less(t, took, 8*time.Second, "start-up waited on the URL that never answers; output:\n%s", p.out)
	require.Contains(t, p.out.String(), "RPC URL does not answer at start")
	require.Contains(t, p.out.String(), hole[len("http://"):])

	pool := openPool(t, dbURL)
	deposited := time.Now()
	require.Eventually(t, func() bool {
		em.Deposit(7)
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM rflow.workflow_runs
			WHERE workflow_name = 'on-deposit' AND status = 'completed'`).Scan(&n))
		return n > 0
	}, 60*time.Second, 300*time.Millisecond, "the deposit's run; output:\n%s", p.out)
	require.Less(t, time.Since(deposited), 8*time.Second, "ingestion started on the URL that never answers")
	t.Logf("started in %s", took)
	p.stop(t)
}
