package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const rollingProject = `
name: rolling
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "%s/%s" } }
%s`

// TestRestartWithOldFileDoesNotRollBack is a rolling deploy with real
// processes: A runs the old file, B the new one. A restarting with its old
// file neither redeploys it nor runs it: it warns, names both generations
// and the rollback command, and a run it starts executes the newer
// definition. `rflow workflows deploy` then rolls back on purpose, after
// which B's restart is the one that is skipped.
func TestRestartWithOldFileDoesNotRollBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPathCounter(t)
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml")
	require.NoError(t, os.WriteFile(oldFile, []byte(fmt.Sprintf(rollingProject, s.URL, "v1", "")), 0o644))
	require.NoError(t, os.WriteFile(newFile, []byte(fmt.Sprintf(rollingProject, s.URL, "v2", `
  - name: added
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "`+s.URL+`/added" } }
`)), 0o644))
	db := storetest.URL(t)
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	start := func(config string) *proc {
		return startRflowArgs(t, nil, "--database-url", db, "--log-level", "info", "start", "-c", config, "--workers", "4")
	}
	generation := func(name string) int64 {
		w, err := store.GetWorkflow(ctx, pool, name)
		if err != nil {
			return 0
		}
		return w.Generation
	}
	logged := func(p *proc, text string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(p.out.String(), text) },
			20*time.Second, 50*time.Millisecond, "want %q in:\n%s", text, p.out)
	}

	a := start(oldFile)
	logged(a, "rflow started")
	require.Equal(t, int64(1), generation("pay"))
	b := start(newFile)
	logged(b, "rflow started")
	require.Equal(t, int64(2), generation("pay"), "a new definition is deployed by a start")

	a.stop(t)
	a = start(oldFile)
	logged(a, "rflow started")
	out := a.out.String()
	require.Contains(t, out, "workflow pay: "+oldFile+" holds generation 1, superseded by generation 2; not redeployed, running generation 2")
	require.Contains(t, out, "rflow workflows deploy -c "+oldFile+" --workflow pay")
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "workflow added was deployed from a project file, but "+oldFile+" no longer has it: its triggers do not run in this process")
	require.Equal(t, int64(2), generation("pay"), "an old file must not roll back a newer generation")
	b.stop(t) // only the restarted old-file process works steps now

	stdout, stderr, code := rflowCmd(t, "--database-url", db, "run", "pay", "-c", oldFile, "--key", "after-restart")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "queued (key after-restart)")
	require.Eventually(t, func() bool { return s.hits("/v2") == 1 }, 20*time.Second, 50*time.Millisecond,
		"the old-file process runs the current generation; output:\n%s", a.out)
	require.Zero(t, s.hits("/v1"))

	// Rolling back on purpose: a new generation with the old definition.
	stdout, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", oldFile, "--workflow", "pay", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var deployed []store.Deployed
	require.NoError(t, json.Unmarshal([]byte(stdout), &deployed), stdout)
	require.Equal(t, []store.Deployed{{Name: "pay", Generation: 3, Changed: true, Previous: 2, SameAs: 1}}, deployed)
	stdout, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", oldFile)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `pay\s+3\s+unchanged`, stdout)

	b = start(newFile)
	logged(b, "rflow started")
	require.Contains(t, b.out.String(), "workflow pay: "+newFile+" holds generation 2, superseded by generation 3")
	require.Equal(t, int64(3), generation("pay"), "the deliberate rollback survives the newer file's restart")
	_, stderr, code = rflowCmd(t, "--database-url", db, "run", "pay", "-c", newFile, "--key", "after-rollback")
	require.Equal(t, 0, code, stderr)
	require.Eventually(t, func() bool { return s.hits("/v1") == 1 }, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, s.hits("/v2"))

	stdout, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", newFile)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `pay\s+4\s+replaces generation 3; same definition as generation 2 \(rollback\)`, stdout)
	require.Regexp(t, `added\s+1\s+unchanged`, stdout)
	_, stderr, code = rflowCmd(t, "--database-url", db, "workflows", "deploy", "-c", newFile, "--workflow", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "workflow nope is not in project rolling (its workflows: ")
	require.NotContains(t, stderr, ": not found", "the message says what is wrong once")
	require.Equal(t, int64(4), generation("pay"), "an unknown name deploys nothing")
	a.stop(t)
	b.stop(t)
}

// pathCounter is a loopback endpoint counting requests per path.
type pathCounter struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func newPathCounter(t *testing.T) *pathCounter {
	c := &pathCounter{seen: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.seen[r.URL.Path]++
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *pathCounter) hits(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[path]
}

// TestPutDeployedEventTriggerClaimsWithoutRestart: a workflow with a new
// event trigger deployed through PUT /v1/workflows into a running
// `rflow start` claims a real anvil's logs (from its contract's start
// block, filtered by where:) without a restart; a redeploy with another
// where: applies to later logs, and no log is claimed twice.
func TestPutDeployedEventTriggerClaimsWithoutRestart(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	s := newPathCounter(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
name: live
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: seed
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "%s/seed" } }
`, node.URL, em.Address.Hex(), s.URL)), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	p := startRflowArgs(t, []string{"RFLOW_API_TOKEN=t0ken"}, "--database-url", storetest.URL(t), "--log-level", "warn",
		"start", "-c", config, "--http", addr)
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 30*time.Second, 50*time.Millisecond, "output: %s", p.out)
	put := func(min int, generation int64) {
		t.Helper()
		body := fmt.Sprintf(`
name: deposits
trigger:
  event: { contract: Vault, event: Deposit, where: "${{ event.amount >= %d }}", run_on: head }
steps:
  - { id: tell, http_call: { method: POST, url: "%s/deposit/${{ event.amount }}" } }
`, min, s.URL)
		req, _ := http.NewRequest(http.MethodPut, base+"/v1/workflows/deposits", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t0ken")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("deploy-%d", generation))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var d store.Deployed
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, generation, d.Generation)
	}

	em.Deposit(15) // before the deploy
	put(10, 1)
	em.Deposit(5) // filtered out
	em.Deposit(20)
	require.Eventually(t, func() bool { return s.hits("/deposit/15") == 1 && s.hits("/deposit/20") == 1 },
		30*time.Second, 50*time.Millisecond, "output: %s", p.out)

	put(100, 2)
	time.Sleep(2 * time.Second) // the new generation is picked up within about a second
	em.Deposit(50)              // passes generation 1 only
	em.Deposit(200)
	require.Eventually(t, func() bool { return s.hits("/deposit/200") == 1 }, 30*time.Second, 50*time.Millisecond, "output: %s", p.out)
	time.Sleep(500 * time.Millisecond)
	require.Zero(t, s.hits("/deposit/5"))
	require.Zero(t, s.hits("/deposit/50"), "generation 2's where: applies after its deploy")
	require.Equal(t, 1, s.hits("/deposit/15"), "no log claimed twice across the switch")
	require.Equal(t, 1, s.hits("/deposit/20"))
	p.stop(t)
}
