package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

const tokenDir = "../../ozimport/testdata/contracts"

// hookSink is a webhook receiver that checks rflow's HMAC signature the
// way docs/http.md tells a receiver to, and records each verified body by
// its Idempotency-Key.
type hookSink struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	bodies map[string][]string // Idempotency-Key → bodies received
	bad    []string
}

func newHookSink(t *testing.T, secret string) *hookSink {
	s := &hookSink{secret: secret, bodies: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, sig := r.Header.Get("X-Rflow-Timestamp"), r.Header.Get("X-Rflow-Signature")
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write([]byte(ts + "." + string(body)))
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		s.mu.Lock()
		defer s.mu.Unlock()
		if ts == "" || !hmac.Equal([]byte(sig), []byte(want)) || r.Header.Get("X-Team") != "treasury" {
			s.bad = append(s.bad, fmt.Sprintf("%s %q sig=%q team=%q", r.Method, body, sig, r.Header.Get("X-Team")))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		k := r.Header.Get("Idempotency-Key")
		s.bodies[k] = append(s.bodies[k], string(body))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

// messages returns the verified deliveries' message bodies, sorted, and
// how many deliveries there were in all.
func (s *hookSink) messages(t *testing.T) ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.bad, "every request is signed with the webhook's secret")
	var out []string
	n := 0
	for _, bs := range s.bodies {
		n += len(bs)
		var m struct{ Title, Body string }
		require.NoError(t, json.Unmarshal([]byte(bs[0]), &m))
		out = append(out, m.Title+" | "+m.Body)
	}
	sort.Strings(out)
	return out, n
}

// writeMonitorConfig writes an OpenZeppelin Monitor configuration that
// watches token's Transfer events above 1000 and posts them to a signed
// webhook whose URL Monitor would read from HOOK_URL.
func writeMonitorConfig(t *testing.T, token common.Address) string {
	t.Helper()
	dir := t.TempDir()
	spec, err := os.ReadFile(filepath.Join(tokenDir, "Token.abi.json"))
	require.NoError(t, err)
	files := map[string]string{
		"networks/local_anvil.json": `{
  "network_type": "EVM", "slug": "local_anvil", "name": "Local anvil",
  "rpc_urls": [{ "type_": "rpc", "url": { "type": "environment", "value": "LOCAL_RPC" }, "weight": 100 }],
  "chain_id": 31337, "block_time_ms": 200, "confirmation_blocks": 1,
  "cron_schedule": "*/2 * * * * *", "max_past_blocks": 50, "store_blocks": false
}`,
		"monitors/large_transfers.json": fmt.Sprintf(`{
  "name": "Large token transfers", "paused": false, "networks": ["local_anvil"],
  "addresses": [{ "address": %q, "contract_spec": %s }],
  "match_conditions": {
    "functions": [], "transactions": [],
    "events": [{ "signature": "Transfer(address,address,uint256)", "expression": "value > 1000" }]
  },
  "trigger_conditions": [],
  "triggers": ["treasury_hook"]
}`, strings.ToLower(token.Hex()), spec),
		"triggers/webhooks.json": `{
  "treasury_hook": {
    "name": "Treasury webhook", "trigger_type": "webhook",
    "config": {
      "url": { "type": "environment", "value": "HOOK_URL" },
      "method": "POST",
      "secret": { "type": "plain", "value": "e2e-hook-secret" },
      "headers": { "X-Team": "treasury" },
      "message": { "title": "${monitor.name}", "body": "${events.0.args.value} to ${events.0.args.to}" }
    }
  }
}`,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// tokenImport is a Token deployed on a real anvil, a Monitor configuration
// watching it imported into an rflow project, and the webhook receiver
// that project posts to.
type tokenImport struct {
	node    *anviltest.Node
	token   *anviltest.Emitter
	hooks   *hookSink
	config  string   // the imported rflow.yaml
	env     []string // what the project reads
	bob     common.Address
	matches []string // the messages expected so far, sorted
}

// setupTokenImport deploys the Token with dev key keyIndex, which then
// makes the transfers.
func setupTokenImport(t *testing.T, keyIndex int) *tokenImport {
	t.Helper()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	f, err := os.Open(filepath.Join(tokenDir, "Token.abi.json"))
	require.NoError(t, err)
	tokenABI, err := abi.JSON(f)
	f.Close()
	require.NoError(t, err)
	token := anviltest.Deploy(t, node, tokenABI, filepath.Join(tokenDir, "Token.bin"), keyIndex) // mints 1e24: a Transfer above 1000
	hooks := newHookSink(t, "e2e-hook-secret")

	cfg := writeMonitorConfig(t, token.Address)
	project := filepath.Join(t.TempDir(), "imported")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"rflow", "import", "oz-monitor", cfg, "-o", project}, &out, &errOut),
		"nothing is left out: exit 0\n%s%s", out.String(), errOut.String())
	require.Contains(t, out.String(), "1 network(s), 1 contract(s), 1 workflow(s)")
	require.Empty(t, errOut.String())
	_, bob := anviltest.Key(t, 1)
	return &tokenImport{node: node, token: token, hooks: hooks, config: filepath.Join(project, "rflow.yaml"),
		env: []string{"LOCAL_RPC=" + node.URL, "HOOK_URL=" + hooks.URL + "/treasury"}, bob: bob,
		matches: []string{"Large token transfers | 1000000000000000000000000 to " + token.From.Hex()}}
}

// transfer sends value tokens to bob; a value above 1000 is expected to
// reach the webhook.
func (ti *tokenImport) transfer(value int64) {
	ti.token.Transact("transfer", ti.bob, big.NewInt(value))
	if value > 1000 {
		ti.matches = append(ti.matches, fmt.Sprintf("Large token transfers | %d to %s", value, ti.bob.Hex()))
		sort.Strings(ti.matches)
	}
}

// expect waits for the expected webhooks, gives a wrong extra one time to
// show, and requires exactly one signed delivery per matching transfer.
func (ti *tokenImport) expect(t *testing.T, p *proc) {
	t.Helper()
	waitHooks(t, ti.hooks, len(ti.matches), p)
	ti.node.Mine(5)
	time.Sleep(2 * time.Second)
	got, deliveries := ti.hooks.messages(t)
	require.Equal(t, ti.matches, got)
	require.Equal(t, len(ti.matches), deliveries, "one delivery per matching transfer")
}

// An OpenZeppelin Monitor configuration for ERC-20 transfers above 1000,
// imported with `rflow import oz-monitor`, validates and runs under `rflow
// start` on a real anvil: one signed webhook per matching transfer (the
// mint included), none for the others, and none again after a kill -9.
func TestImportOZMonitorRunsOnAnvil(t *testing.T) {
	ti := setupTokenImport(t, 0)
	t.Setenv("LOCAL_RPC", ti.node.URL)
	t.Setenv("HOOK_URL", ti.hooks.URL+"/treasury")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"rflow", "validate", "--strict", "-c", ti.config}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "valid: 1 workflow (1 event)")

	dbURL := storetest.URL(t)
	args := []string{"--database-url", dbURL, "--log-level", "warn", "start", "-c", ti.config, "--log-format", "text"}
	p := startRflowArgs(t, ti.env, args...)
	for _, v := range []int64{5000, 1000, 1001, 7} { // 1000 is not > 1000
		ti.transfer(v)
	}
	ti.expect(t, p)

	// kill -9 and a new process: nothing is delivered again, and the next
	// matching transfer still is, once.
	p.kill()
	p = startRflowArgs(t, ti.env, args...)
	ti.transfer(999_999)
	ti.transfer(3)
	ti.expect(t, p)
}

// The imported project of a local network also runs under `rflow dev
// --project`, pointed at the node the token lives on.
func TestImportOZMonitorRunsUnderDev(t *testing.T) {
	t.Parallel()
	ti := setupTokenImport(t, 2) // rflow dev sends with key 0 (it funds its wallet and deploys an Emitter)
	args := []string{"--database-url", storetest.URL(t), "dev", "--project", filepath.Dir(ti.config),
		"--rpc", ti.node.URL, "--http", "127.0.0.1:0", "--log-format", "text", "--log-level", "warn"}
	p := startRflowArgs(t, ti.env, args...)
	ti.transfer(2000)
	ti.transfer(10)
	ti.expect(t, p)
}

func waitHooks(t *testing.T, hooks *hookSink, n int, p *proc) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		hooks.mu.Lock()
		got := len(hooks.bodies)
		hooks.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("waited 90s for %d webhooks; rflow's output:\n%s", n, p.out.String())
}
