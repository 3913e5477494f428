package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const testKey = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"

var referenceEnv = map[string]string{
	"OPS_PRIVATE_KEY": testKey, "HOOK_SECRET": "hook", "API_SECRET": "api", "DATABASE_URL": "postgres://localhost/rflow",
	"SLACK_URL": "https://hooks.slack.example/T0/B0/x",
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// writeProject writes a project with one network (local), one wallet (ops)
// and the Vault contract, whose workflows come from wf.yaml (wf).
func writeProject(t *testing.T, wf string) string {
	t.Helper()
	dir := t.TempDir()
	abiPath, err := filepath.Abs("../testdata/projects/reference/abis/Vault.json")
	require.NoError(t, err)
	project := fmt.Sprintf(`name: t
networks:
  - name: local
    chain_id: 31337
    rpc: http://127.0.0.1:8545
wallets:
  - name: ops
    private_key: "${OPS_KEY:-%s}"
contracts:
  - name: Vault
    abi: %s
    address: "0x5FbDB2315678afecb367f032d93F642f64180aa3"
workflows:
  - include: wf.yaml
`, testKey, abiPath)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(project), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o600))
	return filepath.Join(dir, "rflow.yaml")
}

func TestReferenceProjectValidates(t *testing.T) {
	t.Parallel()
	p, err := Load("../testdata/projects/reference/rflow.yaml", LoadOptions{LookupEnv: lookup(referenceEnv), Strict: true})
	require.NoError(t, err)
	require.Equal(t, "vault-ops", p.Name)
	require.Equal(t, "6 workflows (1 event, 1 cron, 1 block, 1 read, 1 webhook, 1 manual), 19 steps", p.Summary())

	w := p.Workflow("refund-large-deposits")
	require.NotNil(t, w)
	require.Equal(t, "Deposit", w.Trigger.Event.ABIEvent.Name)
	require.Equal(t, RunOnConfirmed, w.Trigger.Event.RunOn)
	require.Equal(t, "5000000000000000000", w.Budgets[0].Cap.String())
	require.Equal(t, "remind", w.Step("claimed").WaitFor.OnTimeoutGoto)
	require.Equal(t, 5, w.Step("lookup").Retry.MaxAttempts)
	require.Equal(t, "api", w.Step("lookup").HTTPCall.HMACSecret.Reveal())
	require.NotContains(t, string(w.Spec), `"api"`, "secrets stay ${VAR} references in the spec")
	require.Contains(t, string(w.Spec), "${API_SECRET}")
	require.Equal(t, "ping", w.Step("each").Foreach.Steps[0].ID)

	read := p.Workflow("low-assets").Trigger.Read
	require.Equal(t, uint64(5), read.EveryBlocks)
	data, err := p.Workflow("low-assets").Step("top_up").Send.Calldata(Env{"result": int64(7)})
	require.NoError(t, err)
	require.Equal(t, "a9059cbb", fmt.Sprintf("%x", data[:4]), "transfer(address,uint256) selector")

	require.Equal(t, "Token", p.Workflow("low-assets").Step("top_up").Send.Contract)
	require.NotNil(t, p.Workflow("partner-hook").Trigger.Webhook.IdempotencyKey, "webhook key compiled")
}

func TestSpecIgnoresFormatting(t *testing.T) {
	t.Parallel()
	block := `# a comment
name: w
trigger:
  event:
    contract: Vault
    event: Deposit
    where: "${{ event.amount > 1 }}"
steps:
  - id: a
    delay: 10m
`
	flow := `{steps: [{delay: "10m", id: a}], name: w, trigger: {event: {where: "${{ event.amount > 1 }}", event: Deposit, contract: Vault}}}`
	p1, err := Load(writeProject(t, block), LoadOptions{})
	require.NoError(t, err)
	p2, err := Load(writeProject(t, flow), LoadOptions{})
	require.NoError(t, err)
	w1, w2 := p1.Workflows[0], p2.Workflows[0]
	require.Equal(t, string(w1.Spec), string(w2.Spec))
	require.Equal(t, w1.Hash, w2.Hash)
	require.Len(t, w1.Hash, 64)

	p3, err := Load(writeProject(t, strings.Replace(block, "10m", "11m", 1)), LoadOptions{})
	require.NoError(t, err)
	require.NotEqual(t, w1.Hash, p3.Workflows[0].Hash, "a different definition has a different hash")
}

func TestCompileSpecRoundTrip(t *testing.T) {
	t.Parallel()
	p, err := Load("../testdata/projects/reference/rflow.yaml", LoadOptions{LookupEnv: lookup(referenceEnv)})
	require.NoError(t, err)
	for _, w := range p.Workflows {
		got, err := CompileSpec(p, w.Spec, OriginFile)
		require.NoError(t, err, w.Name)
		require.Equal(t, w.Hash, got.Hash, w.Name)
		require.Equal(t, w.Name, got.Name)
		require.Equal(t, w.Trigger.Kind, got.Trigger.Kind)
		require.Equal(t, len(w.Steps), len(got.Steps))
	}
	_, err = CompileSpec(p, []byte(`{"name":"x","trigger":{"manual":{}},"steps":[{"id":"a","goto":"nowhere"}]}`), OriginFile)
	var ds Diagnostics
	require.True(t, errors.As(err, &ds))
	require.Contains(t, ds.Error(), `spec of x: goto: no step "nowhere"`)
}

func TestParseWorkflowJSONAndYAML(t *testing.T) {
	t.Parallel()
	p, err := Load("../testdata/projects/reference/rflow.yaml", LoadOptions{LookupEnv: lookup(referenceEnv)})
	require.NoError(t, err)
	yml := "name: api\ntrigger: {manual: {}}\nsteps:\n  - id: a\n    noop: {}\n"
	js := `{"name": "api", "trigger": {"manual": {}}, "steps": [{"id": "a", "noop": {}}]}`
	w1, err := ParseWorkflow(p, "body.yaml", []byte(yml))
	require.NoError(t, err)
	w2, err := ParseWorkflow(p, "body.json", []byte(js))
	require.NoError(t, err)
	require.Equal(t, w1.Hash, w2.Hash)

	_, err = ParseWorkflow(p, "body.yaml", []byte("name: api\ntrigger: {manual: {}}\nsteps:\n  - id: a\n    noop: {}\n    sned: {}\n"))
	require.EqualError(t, err, `body.yaml:6:5: unknown key "sned" in step; did you mean send?`)
}

// diagnosticCase is one invalid (or warned-about) workflow and what
// validation must say about it: "line:col: message" in wf.yaml, warnings
// prefixed with "warning: ".
type diagnosticCase struct {
	name string
	wf   string
	want []string
}

func TestDiagnostics(t *testing.T) {
	t.Parallel()
	steps := "steps:\n  - id: a\n    noop: {}\n"
	cases := []diagnosticCase{
		{"unknown contract", "name: w\ntrigger:\n  event: { contract: Vualt, event: Deposit }\n" + steps,
			[]string{"3:22: unknown contract Vualt; did you mean Vault?"}},
		{"unknown event", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposited }\n" + steps,
			[]string{"3:36: unknown event Deposited on Vault; did you mean Deposit? (events: Claimed, Deposit)"}},
		{"unknown function", "name: w\ntrigger:\n  read: { contract: Vault, function: totalAsets, every: 10s }\n" + steps,
			[]string{"3:38: unknown function totalAsets on Vault; did you mean totalAssets?"}},
		{"not a view", "name: w\ntrigger:\n  read: { contract: Vault, function: refund, args: [\"0x5FbDB2315678afecb367f032d93F642f64180aa3\", 1], every: 10s }\n" + steps,
			[]string{"3:38: read trigger: Vault.refund is not a view function"}},
		{"unknown wallet", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send: { wallet: opz, to: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\" }\n",
			[]string{"5:21: unknown wallet opz; did you mean ops?"}},
		{"unknown network", "name: w\ntrigger:\n  block: { network: locl }\n" + steps,
			[]string{"3:21: unknown network locl; did you mean local?"}},
		{"unknown step in expression", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: lookup\n    noop: {}\n  - id: b\n    if: \"${{ steps.lokup.output.ok }}\"\n    noop: {}\n",
			[]string{"7:20: in ${{ steps.lokup.output.ok }}: unknown field lokup of steps; did you mean lookup?"}},
		{"tx_log_index in a trigger's where", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit, where: \"${{ event.tx_log_index == 0 }}\" }\n" + steps,
			[]string{"3:63: in ${{ event.tx_log_index == 0 }}: unknown field tx_log_index of event Deposit; did you mean log_index? (fields: address, amount, block, block_hash, log_index, sender, tx_hash)"}},
		{"unknown variable", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit, where: \"${{ evnt.amount > 0 }}\" }\n" + steps,
			[]string{"3:57: in ${{ evnt.amount > 0 }}: unknown variable evnt; did you mean event?"}},
		{"variable of another trigger", "name: w\ntrigger: { cron: \"@hourly\" }\nsteps:\n  - id: a\n    fail: \"${{ event.amount }}\"\n",
			[]string{"5:16: in ${{ event.amount }}: event is only available with an event trigger"}},
		{"event where type error", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit, where: \"${{ event.amount >= 'lots' }}\" }\n" + steps,
			[]string{"3:70: in ${{ event.amount >= 'lots' }}: cannot compare uint256 with string using >="}},
		{"if not boolean", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    if: \"${{ 1 + 2 }}\"\n    noop: {}\n",
			[]string{"5:14: if must be a boolean expression; ${{ 1 + 2 }} is integer"}},
		{"duplicate step ids", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    noop: {}\n  - id: a\n    noop: {}\n",
			[]string{"6:9: duplicate step id \"a\" (first at"}},
		{"goto missing", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    goto: finish\n  - id: finnish\n    noop: {}\n",
			[]string{"5:11: goto: no step \"finish\" in this step list or an enclosing one; did you mean finnish?"}},
		{"goto into a foreach", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    goto: inner\n  - id: each\n    foreach: \"${{ [1, 2] }}\"\n    steps: [{ id: inner, noop: {} }]\n",
			[]string{"5:11: goto: no step \"inner\""}},
		{"bad durations", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    delay: 10 parsecs\n  - id: b\n    http_call: { url: https://x.example, timeout: 10 }\n",
			[]string{"5:12: delay: \"10 parsecs\" is not a duration", "7:51: timeout: 10 has no unit"}},
		{"bad cron", "name: w\ntrigger:\n  cron: { schedule: \"*/5 * * *\" }\n" + steps,
			[]string{"3:21: invalid cron schedule \"*/5 * * *\""}},
		{"bad address", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send: { wallet: ops, to: \"0x5fbdb2315678afecb367f032d93F642f64180aa3\" }\n  - id: b\n    send: { wallet: ops, to: \"0x1234\" }\n",
			[]string{"5:30: to: address 0x5fbdb2315678afecb367f032d93F642f64180aa3 has a bad EIP-55 checksum", "7:30: to: \"0x1234\" is not a 0x-prefixed 20-byte hex address"}},
		{"two triggers", "name: w\ntrigger:\n  manual: {}\n  cron: \"@daily\"\n" + steps,
			[]string{"3:3: a workflow has exactly one trigger; found manual and cron"}},
		{"no trigger", "name: w\n" + steps,
			[]string{"1:1: workflow w: missing trigger"}},
		{"function arg types", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit }\nsteps:\n  - id: a\n    send: { wallet: ops, contract: Vault, function: refund, args: [\"nope\", \"${{ event.sender }}\"] }\n",
			[]string{"6:68: argument 1 (address to) of refund: \"nope\" is not a 0x-prefixed 20-byte hex address", "6:76: argument 2 (uint256 amount) of refund: got address"}},
		{"address as a uint256 argument", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send: { wallet: ops, contract: Vault, function: refund, args: [\"0x5FbDB2315678afecb367f032d93F642f64180aa3\", \"0x5FbDB2315678afecb367f032d93F642f64180aa3\"] }\n",
			[]string{"5:114: argument 2 (uint256 amount) of refund: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\" is an address, not an integer"}},
		{"undeclared env in a url", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    notify: { webhook: \"${{ env.HOOK }}/x\", text: hi }\n  - id: b\n    notify: { slack: \"${{ env.HOOK }}\", text: hi }\n",
			[]string{"5:33: in ${{ env.HOOK }}: env.HOOK is not declared in rflow.yaml env:; add it to expose it", "7:31: in ${{ env.HOOK }}: env.HOOK is not declared"}},
		{"function arg count", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send: { wallet: ops, contract: Vault, function: refund, args: [1] }\n",
			[]string{"5:61: send: refund takes 2 argument(s) (address to, uint256 amount), got 1"}},
		{"unknown key", "name: w\ntrigger: { manual: {} }\nstpes:\n  - id: a\n    noop: {}\n",
			[]string{"1:1: workflow w: needs at least one step", "3:1: unknown key \"stpes\" in workflow; did you mean steps?"}},
		{"two actions", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    noop: {}\n    delay: 1s\n",
			[]string{"4:5: step a has 2 actions (noop, delay)"}},
		{"missing env", "name: w\ntrigger: { webhook: { secret: \"${NOPE}\", idempotency_key: \"${{ body.id }}\" } }\n" + steps,
			[]string{"2:31: environment variable NOPE is not set"}},
		{"on_reorg without event", "name: w\ntrigger: { manual: {} }\n" + steps + "on_reorg:\n  - id: b\n    noop: {}\n",
			[]string{"6:1: workflow w: on_reorg needs an event trigger"}},
		{"reorg outside on_reorg", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit }\nsteps:\n  - id: a\n    fail: \"${{ reorg.depth }}\"\n",
			[]string{"6:16: in ${{ reorg.depth }}: reorg is only available in on_reorg steps"}},
		{"unknown reorg field", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit }\n" + steps + "on_reorg:\n  - id: b\n    fail: \"${{ reorg.fork + steps.a.status + reorg.old_hash }}\"\n",
			[]string{"9:22: in ${{ reorg.fork + steps.a.status + reorg.old_hash }}: unknown field fork of reorg (fields: chain_id, depth, fork_block, new_hash, old_hash, run_status)"}},
		{"wait_for in on_reorg", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit }\n" + steps + "on_reorg:\n  - id: b\n    wait_for: { event: { contract: Vault, event: Claimed }, timeout: 1h }\n",
			[]string{"8:5: step b: wait_for is not available in on_reorg"}},
		{"item outside foreach", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    fail: \"${{ item }}\"\n",
			[]string{"5:16: in ${{ item }}: item is only available inside a foreach"}},
		{"unknown budget", "name: w\ntrigger: { manual: {} }\nbudgets: [{ name: refunds, cap: 1 ether, window: 1h }]\nsteps:\n  - id: a\n    send: { wallet: ops, to: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\", budget: refund }\n",
			[]string{"6:84: unknown budget refund; declare it under the workflow's budgets:; did you mean refunds?"}},
		{"ERC-20 budget on a call it cannot count", "name: w\ntrigger: { manual: {} }\nbudgets: [{ name: tokens, asset: Vault, cap: 100, window: 1h }]\nsteps:\n  - id: a\n    send: { wallet: ops, contract: Vault, function: refund, args: [\"0x5FbDB2315678afecb367f032d93F642f64180aa3\", 1], budget: tokens }\n",
			[]string{"6:126: budget tokens caps Vault transfers: a send under it must call Vault.transfer or Vault.transferFrom (contract: Vault, function: transfer)"}},
		{"approval notify unknown", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send:\n      wallet: ops\n      to: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\"\n      approval: { notify: pagr }\n",
			[]string{"8:27: approval notify: unknown notifier \"pagr\""}},
		{"bad step id", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: my-step\n    noop: {}\n",
			[]string{"4:9: step id \"my-step\" must start with a letter or _"}},
		{"yaml syntax", "name: w\ntrigger: { manual: {} \nsteps: []\n",
			[]string{"3:1: invalid YAML: ',' or '}' must be specified"}},
		{"signed webhook keyed on a header chosen by the body", "name: w\ntrigger:\n  webhook: { secret: s, signed_headers: [x-a], idempotency_key: \"${{ headers['x-a'] + headers[body.h] }}\" }\n" + steps,
			[]string{"3:22: warning: workflow w: webhook secret is written literally", "3:65: idempotency_key reads headers (as a whole)"}},
		{"legacy signatures sign no header", "name: w\ntrigger:\n  webhook: { secret: s, legacy_signatures: true, signed_headers: [x-a], idempotency_key: \"${{ headers['x-a'] }}\" }\n" + steps,
			[]string{"3:22: warning: workflow w: webhook secret is written literally", "3:44: warning: legacy_signatures is deprecated", "3:90: idempotency_key reads headers['x-a'], which the webhook's signature does not cover: a captured request re-sent with another value there would start a new run; v1 signatures"}},
		{"signed headers without a secret", "name: w\ntrigger:\n  webhook: { signed_headers: [x-a], idempotency_key: \"${{ headers['x-a'] }}\" }\n" + steps,
			[]string{"3:30: signed_headers needs a secret"}},
		// Warnings: the project is valid, but not the way its author expects.
		{"approval proceed", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send:\n      wallet: ops\n      to: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\"\n      approval: { on_timeout: proceed }\n",
			[]string{"8:31: warning: approval on_timeout: proceed broadcasts the transaction"}},
		{"confirmations 0", "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit, confirmations: 0 }\nsteps:\n  - id: a\n    wait_for: { event: { contract: Vault, event: Claimed }, confirmations: 0, timeout: 1h }\n",
			[]string{"3:60: warning: event trigger: confirmations: 0", "6:76: warning: wait_for: confirmations: 0"}},
		{"webhook without key", "name: w\ntrigger:\n  webhook: {}\n" + steps,
			[]string{"3:3: warning: webhook trigger without idempotency_key: runs are at-least-once"}},
		{"send under in-process rate limit", "name: w\ntrigger: { manual: {} }\nrate_limit: { max: 1, per: 1m }\nsteps:\n  - id: a\n    send: { wallet: ops, to: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\" }\n",
			[]string{"5:5: warning: step a sends a transaction under a rate_limit that is not durable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := writeProject(t, c.wf)
			wfFile := filepath.Join(filepath.Dir(path), "wf.yaml")
			p, err := Load(path, LoadOptions{LookupEnv: lookup(nil)})
			var got Diagnostics
			if err != nil {
				require.True(t, errors.As(err, &got), "error is Diagnostics: %v", err)
			} else {
				got = p.Warnings
			}
			require.Len(t, got, len(c.want), "got:\n%s", got.Error())
			for i, want := range c.want {
				line := strings.TrimPrefix(got[i].String(), wfFile+":")
				require.True(t, strings.HasPrefix(line, want), "diagnostic %d\n got: %s\nwant: %s", i, line, want)
			}
			warningsOnly := !got.HasErrors()
			if warningsOnly {
				_, err := Load(path, LoadOptions{LookupEnv: lookup(nil), Strict: true})
				require.Error(t, err, "--strict turns warnings into errors")
			}
		})
	}
}

// TestCompileSpecAfterJSONB checks that a spec rewritten the way Postgres
// jsonb rewrites it (key order, spacing, number spelling) compiles to the
// same hash.
func TestCompileSpecAfterJSONB(t *testing.T) {
	t.Parallel()
	wf := "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    http_call: { url: https://x.example, method: POST, body: { f: 1000000000000000000000.0, g: 0.5, h: 3.0, big: 115792089237316195423570985008687907853269984665640564039457584007913129639935 } }\n"
	p, err := Load(writeProject(t, wf), LoadOptions{})
	require.NoError(t, err)
	w := p.Workflows[0]
	require.Contains(t, string(w.Spec), `"f":1000000000000000000000.0`)
	require.Contains(t, string(w.Spec), `"h":3.0`)

	// Rewrite it as jsonb would: other key order, other spacing.
	var indented bytes.Buffer
	require.NoError(t, json.Indent(&indented, w.Spec, "", "  "))
	rewritten := strings.Replace(indented.String(), "\n  \"name\": \"w\",", "", 1)
	rewritten = strings.TrimSuffix(rewritten, "\n}") + ",\n  \"name\": \"w\"\n}"
	require.NotEqual(t, string(w.Spec), rewritten)
	got, err := CompileSpec(p, []byte(rewritten), OriginFile)
	require.NoError(t, err)
	require.Equal(t, w.Hash, got.Hash)
	require.Equal(t, string(w.Spec), string(got.Spec))
}

func TestEnvRefsInFlowMappings(t *testing.T) {
	t.Parallel()
	// YAML forbids { and } in plain flow scalars; ${VAR} is allowed anyway.
	wf := "name: w\ntrigger: { webhook: { secret: ${HOOK}, idempotency_key: \"${{ body.id }}\" } }\nsteps:\n  - { id: a, http_call: { url: \"https://${HOST}/x\", hmac_secret: ${MISSING} } }\n"
	_, err := Load(writeProject(t, wf), LoadOptions{LookupEnv: lookup(map[string]string{"HOOK": "h", "HOST": "api.example"})})
	var ds Diagnostics
	require.True(t, errors.As(err, &ds))
	require.Len(t, ds, 1)
	require.True(t, strings.HasSuffix(ds[0].String(), "wf.yaml:4:66: environment variable MISSING is not set (referenced as ${MISSING})"), ds[0].String())

	p, err := Load(writeProject(t, wf), LoadOptions{LookupEnv: lookup(map[string]string{"HOOK": "h", "HOST": "api.example", "MISSING": "m"})})
	require.NoError(t, err)
	w := p.Workflows[0]
	require.Equal(t, "h", w.Trigger.Webhook.Secret.Reveal())
	require.Equal(t, "m", w.Steps[0].HTTPCall.HMACSecret.Reveal())
	url, err := w.Steps[0].HTTPCall.URL.String(nil)
	require.NoError(t, err)
	require.Equal(t, "https://api.example/x", url)
	require.Contains(t, string(w.Spec), `"secret":"${HOOK}"`)
	require.Contains(t, string(w.Spec), `"hmac_secret":"${MISSING}"`)
}

func TestEnvRefDefaults(t *testing.T) {
	t.Parallel()
	// ${VAR:-default}: the default when VAR is unset or empty, VAR otherwise;
	// also unquoted in a flow mapping; the Spec keeps the reference.
	wf := "name: w\ntrigger: { webhook: { secret: ${HOOK:-dflt} } }\nsteps:\n  - { id: a, http_call: { url: \"${BASE:-http://127.0.0.1:9}/x\" } }\n"
	for _, tc := range []struct {
		env          map[string]string
		secret, base string
	}{
		{map[string]string{}, "dflt", "http://127.0.0.1:9"},
		{map[string]string{"HOOK": "", "BASE": ""}, "dflt", "http://127.0.0.1:9"},
		{map[string]string{"HOOK": "h", "BASE": "https://api.example"}, "h", "https://api.example"},
	} {
		p, err := Load(writeProject(t, wf), LoadOptions{LookupEnv: lookup(tc.env)})
		require.NoError(t, err)
		w := p.Workflows[0]
		require.Equal(t, tc.secret, w.Trigger.Webhook.Secret.Reveal())
		url, err := w.Steps[0].HTTPCall.URL.String(nil)
		require.NoError(t, err)
		require.Equal(t, tc.base+"/x", url)
		require.Contains(t, string(w.Spec), `"secret":"${HOOK:-dflt}"`)
		got, err := CompileSpec(p, w.Spec, OriginFile)
		require.NoError(t, err)
		require.Equal(t, w.Hash, got.Hash)
	}
}

// A signed webhook keyed on a header it does not list in signed_headers
// (REFERENCE.md's own example) is valid: the header joins signed_headers,
// so the server refuses a request whose signature leaves it out.
func TestIdempotencyKeyHeaderIsSignedImplicitly(t *testing.T) {
	t.Parallel()
	p, err := Load("../testdata/projects/reference/rflow.yaml", LoadOptions{LookupEnv: lookup(referenceEnv)})
	require.NoError(t, err)
	wf, err := ParseWorkflow(p, "wf.yaml", []byte("name: w\ntrigger:\n  webhook: { secret: s3cret-s3cret, idempotency_key: \"${{ headers['X-Idempotency-Key'] }}\" }\n"+
		"steps:\n  - { id: a, noop: {} }\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"x-idempotency-key"}, wf.Trigger.Webhook.SignedHeaders)
}
