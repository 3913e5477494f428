package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/store/storetest"
)

// projectAdditions adds to the scaffold's rflow.yaml a second contract (the
// same Emitter, as Vault), a wallet, a notifier and a workflow that uses
// them all (its send goes through the new wallet).
const projectAdditions = `  - name: Vault
    abi: ./abis/Emitter.json
    network: local
    address: ${RFLOW_DEV_CONTRACT:-0x5FbDB2315678afecb367f032d93F642f64180aa3}
    start_block: ${RFLOW_DEV_START_BLOCK:-0}
wallets:
  - { name: ops, private_key: "${RFLOW_DEV_WALLET_KEY}" }
notifiers:
  - { name: pager, webhook: "${RFLOW_DEV_ENDPOINT:-http://127.0.0.1:1}/dev/notify" }
workflows:
  - include: workflows/*.yaml
  - name: vault-watch
    trigger:
      event: { contract: Vault, event: Deposit }
    circuit_breaker: { failures: 5, window: 10m, notify: pager }
    steps:
      - id: hello
        notify: { webhook: "${RFLOW_DEV_ENDPOINT:-http://127.0.0.1:1}/dev/notify", text: "vault saw ${{ event.amount }}" }
      - id: thank
        send: { wallet: ops, contract: Vault, function: claim, args: ["${{ event.amount }}"], confirmations: 1 }
`

// TestDevReloadsTheWholeProject edits rflow.yaml under a running `rflow
// dev --project` (a real process): a new contract, wallet, notifier and a
// workflow using them is a new generation of the whole project, and the new
// workflow's runs complete, sends included; an edit that does not validate is refused once,
// at file:line:col, and both workflows keep running; no warning repeats.
func TestDevReloadsTheWholeProject(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)
	dbURL := storetest.URL(t)
	p := startRflowArgs(t, nil, "--database-url", dbURL, "dev", "--project", dir, "--http", "127.0.0.1:0",
		"--emit-every", "500ms", "--chain", devchain.BackendSimulated)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rflow dev said:\n%s", p.out)
		}
	})
	completed := func(wf string) int {
		out, _, code := rflowCmd(t, "--database-url", dbURL, "runs", "list", "--workflow", wf, "--status", "completed", "-o", "json")
		var page struct {
			Runs []struct {
				ID string `json:"id"`
			} `json:"runs"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &page) != nil {
			return 0
		}
		return len(page.Runs)
	}
	require.Eventually(t, func() bool { return completed("on-deposit") > 0 }, 60*time.Second, 200*time.Millisecond)

	// A console login made before the reload still holds after it.
	console := bannerConsole.FindStringSubmatch(p.out.String())
	require.NotNil(t, console, "rflow dev printed no console URL")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.PostForm(console[1]+"login", url.Values{"token": {console[2]}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	cookie := res.Cookies()[0]

	file := filepath.Join(dir, "rflow.yaml")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	v2 := regexp.MustCompile(`(?m)^workflows:\n  - include: workflows/\*\.yaml.*\n`).ReplaceAllLiteralString(string(src), projectAdditions)
	require.NotEqual(t, string(src), v2)
	require.NoError(t, os.WriteFile(file, []byte(v2), 0o644))
	require.Eventually(t, func() bool {
		return strings.Contains(p.out.String(), "reloaded rflow.yaml: project generation 2 runs (2 workflow(s)")
	}, 30*time.Second, 100*time.Millisecond)
	require.Contains(t, p.out.String(), "reloaded rflow.yaml: workflow=vault-watch generation 1")
	status := 0
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, console[1], nil)
		req.AddCookie(cookie)
		res, err := noFollow.Do(req)
		if err != nil {
			return false // the new generation's server is not up yet
		}
		res.Body.Close()
		status = res.StatusCode
		return true
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, http.StatusOK, status, "the reload logged the console out")
	require.Eventually(t, func() bool { return completed("vault-watch") > 0 }, 30*time.Second, 200*time.Millisecond,
		"the workflow added with its contract and notifier never ran")

	// Invalid: the contract's network does not exist. Refused whole, once.
	broken := strings.Replace(v2, "    network: local\n    address: ${RFLOW_DEV_CONTRACT:-0x5FbDB2315678afecb367f032d93F642f64180aa3}\n    start_block: ${RFLOW_DEV_START_BLOCK:-0}\nwallets:",
		"    network: nowhere\n    address: ${RFLOW_DEV_CONTRACT:-0x5FbDB2315678afecb367f032d93F642f64180aa3}\n    start_block: ${RFLOW_DEV_START_BLOCK:-0}\nwallets:", 1)
	require.NotEqual(t, v2, broken)
	require.NoError(t, os.WriteFile(file, []byte(broken), 0o644))
	refusal := regexp.MustCompile(`not reloaded rflow\.yaml \(the previous generation keeps running\): \d+ problem\(s\)\n\s+\S*rflow\.yaml:\d+:\d+: [^\n]*nowhere`)
	require.Eventually(t, func() bool { return refusal.MatchString(p.out.String()) }, 15*time.Second, 100*time.Millisecond)
	before := map[string]int{"on-deposit": completed("on-deposit"), "vault-watch": completed("vault-watch")}
	require.Eventually(t, func() bool {
		return completed("on-deposit") > before["on-deposit"] && completed("vault-watch") > before["vault-watch"]
	}, 30*time.Second, 200*time.Millisecond, "the previous generation stopped running after a refused edit")

	out := p.out.String()
	require.Equal(t, 1, strings.Count(out, "not reloaded rflow.yaml"), "the refusal repeats")
	require.NotContains(t, out, "project generation 3", "a refused edit started a generation")
	require.NotContains(t, out, "level=WARN", "warnings beside the reload")
	p.stop(t)
}

// An edit that validates but would strand runs in flight (their
// generation names a contract the edit renames) is refused whole, and the
// previous generation keeps running them.
func TestDevRefusesAProjectThatStrandsRunsInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"rflow.yaml", "abis/Emitter.json"} {
		b, err := os.ReadFile(filepath.Join("../../examples/saga", f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	dbURL := storetest.URL(t)
	p := startRflowArgs(t, nil, "--database-url", dbURL, "dev", "--project", dir, "--http", "127.0.0.1:0",
		"--emit-every", "1s", "--chain", devchain.BackendSimulated)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rflow dev said:\n%s", p.out)
		}
	})
	require.Eventually(t, func() bool { return len(runIDs(t, dbURL, "--status", "waiting_event")) > 0 },
		60*time.Second, 200*time.Millisecond, "no saga run waits")

	file := filepath.Join(dir, "rflow.yaml")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	renamed := strings.ReplaceAll(string(src), "Vault", "Vault2")
	require.NoError(t, os.WriteFile(file, []byte(renamed), 0o644))
	require.Eventually(t, func() bool {
		out := p.out.String()
		return strings.Contains(out, "not reloaded rflow.yaml (the previous generation keeps running): deposit-claimed generation 1 has") &&
			strings.Contains(out, "which the new project cannot finish")
	}, 20*time.Second, 100*time.Millisecond)
	// The waiting runs still finish through their claims.
	before := len(runIDs(t, dbURL, "--status", "completed"))
	require.Eventually(t, func() bool { return len(runIDs(t, dbURL, "--status", "completed")) > before },
		30*time.Second, 200*time.Millisecond)
	require.NotContains(t, p.out.String(), "project generation 2")
	p.stop(t)
}
