package ozimport_test

import (
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/ozimport"
	"github.com/rflow-dev/rflow/workflow"
)

// fixtureEnv is what an operator would export for the fixture project.
var fixtureEnv = map[string]string{
	"DEVNET_RPC":               "http://127.0.0.1:8545",
	"RPC_SEPOLIA_OPS_1":        "https://sepolia-primary.example.org",
	"START_BLOCK_SEPOLIA_OPS":  "6100000",
	"OPS_HOOK_URL":             "https://ops.example.org/hook",
	"OPS_HOOK_SECRET":          "s3cret",
	"TREASURY_SLACK_URL":       "https://hooks.slack.example.org/T/B/C",
	"START_BLOCK_DEVNET_ANVIL": "",
}

type importBundle struct {
	dir     string
	result  *ozimport.Result
	project *workflow.Project
}

func setupImport(t *testing.T) *importBundle {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "treasury")
	r, err := ozimport.Import("testdata/config", dir, ozimport.Options{})
	require.NoError(t, err)
	p, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{LookupEnv: func(k string) (string, bool) {
		v, ok := fixtureEnv[k]
		return v, ok
	}})
	require.NoError(t, err, "the imported project validates")
	return &importBundle{dir: dir, result: r, project: p}
}

func (b *importBundle) file(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, rel))
	require.NoError(t, err)
	return string(data)
}

func TestImportNetworks(t *testing.T) {
	t.Parallel()
	b := setupImport(t)
	require.Len(t, b.project.Networks, 2, "EVM networks only; Stellar is left out")
	dev, sep := b.project.Networks[0], b.project.Networks[1]
	require.Equal(t, "devnet-anvil", dev.Name)
	require.Equal(t, uint64(31337), dev.ChainID)
	require.Equal(t, []string{"http://127.0.0.1:8545"}, dev.RPC, "an environment URL is ${DEVNET_RPC}")
	require.Equal(t, 1, dev.Confirmations)
	require.Equal(t, 500*time.Millisecond, dev.BlockPollInterval)
	require.Equal(t, uint64(25), dev.MaxBlockRange, "max_past_blocks")

	require.Equal(t, "sepolia-ops", sep.Name)
	require.Equal(t, []string{"https://sepolia-primary.example.org", "https://sepolia-backup.example.org"}, sep.RPC,
		"weight 80 (a vault secret, now ${RPC_SEPOLIA_OPS_1}) before weight 20 (plain)")
	require.Equal(t, 3, sep.Confirmations)
	require.Equal(t, 12*time.Second, sep.BlockPollInterval)
	require.Equal(t, uint64(2000), sep.MaxBlockRange, "unlimited keeps rflow's default")

	env := b.file(t, ".env.example")
	require.Contains(t, env, "\nSTART_BLOCK_DEVNET_ANVIL=0\n")
	for _, name := range []string{"DEVNET_RPC", "RPC_SEPOLIA_OPS_1", "START_BLOCK_SEPOLIA_OPS", "OPS_HOOK_URL", "OPS_HOOK_SECRET", "TREASURY_SLACK_URL"} {
		require.Contains(t, env, "\n"+name+"=\n")
	}
	require.Contains(t, env, `HashiCorp Cloud Vault secret "sepolia-primary-rpc"`)
	require.NotContains(t, env, "TESTTOKEN", "a plain secret is not copied into .env.example")
}

func TestImportMonitors(t *testing.T) {
	t.Parallel()
	b := setupImport(t)
	names := []string{}
	for _, c := range b.project.Contracts {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"dormant-mints-x", "token-whale-transfers", "treasury-guard-sepolia-ops-1"}, names,
		"one contract per watched address with an ABI")
	c := b.project.Contracts[1]
	require.Equal(t, "0x5FbDB2315678afecb367f032d93F642f64180aa3", c.Address.Hex())
	require.Equal(t, uint64(0), c.StartBlock, "a dev chain starts at 0 unless told otherwise")
	require.NotNil(t, c.ABI.Events["Transfer"])
	require.Equal(t, uint64(6100000), b.project.Contracts[2].StartBlock, "${START_BLOCK_SEPOLIA_OPS}")
	require.Equal(t, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", b.project.Contracts[2].Address.Hex(),
		"a mixed-case address with a wrong checksum (fine in Monitor) is written in checksum form")

	w := b.project.Workflow("token-whale-transfers-transfer")
	require.NotNil(t, w)
	require.Equal(t, "token-whale-transfers", w.Trigger.Event.Contract)
	require.Equal(t, "Transfer", w.Trigger.Event.Event)
	require.Equal(t, "event.value > 1000", w.Trigger.Event.Where.Source())

	g := b.project.Workflow("treasury-guard-transfer")
	require.NotNil(t, g)
	ok, err := g.Trigger.Event.Where.Bool(transfer("0x70997970c51812dc3a010c7d01b50e0d17dc79c8", 1000))
	require.NoError(t, err)
	require.True(t, ok, "from matches case-insensitively and 1000 >= 0x3e8")
	ok, err = g.Trigger.Event.Where.Bool(transfer("0x70997970c51812dc3a010c7d01b50e0d17dc79c8", 999))
	require.NoError(t, err)
	require.False(t, ok)

	burn := b.project.Workflow("token-whale-transfers-transfer-2")
	require.NotNil(t, burn, "a second event condition is a second workflow")
	require.Equal(t, `event.to == "0x000000000000000000000000000000000000dEaD"`, burn.Trigger.Event.Where.Source())
	require.Nil(t, b.project.Workflow("treasury-guard-transfer-2"), "an untranslatable condition writes no workflow")

	require.Nil(t, b.project.Workflow("dormant-mints-x-transfer"), "a paused monitor's workflow is not deployed")
	paused := b.file(t, "workflows/paused/dormant-mints-x-transfer.yaml")
	require.Contains(t, paused, "The monitor is paused in Monitor")
	pw, err := workflow.ParseWorkflow(b.project, "paused.yaml", []byte(paused))
	require.NoError(t, err, "the paused workflow validates once included")
	require.Equal(t, "dormant-mints-x-transfer", pw.Name)
	require.Contains(t, b.file(t, "rflow.yaml"), "#   - include: workflows/paused/*.yaml")

	wf := b.file(t, "workflows/treasury-guard-transfer.yaml")
	require.Contains(t, wf, "# match_conditions.events[0].expression: (from == '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' OR", "the source is a comment")
	require.Contains(t, wf, "# Monitor trigger treasury_slack (Treasury Slack, slack in triggers/chat.json).")
}

func TestImportTriggers(t *testing.T) {
	t.Parallel()
	b := setupImport(t)
	ev := transfer("0x70997970C51812dc3A010C7d01b50e0d17dc79C8", 1234)

	w := b.project.Workflow("token-whale-transfers-transfer")
	require.Len(t, w.Steps, 1)
	h := w.Steps[0]
	require.Equal(t, "ops_hook", h.ID)
	require.NotNil(t, h.HTTPCall)
	require.Equal(t, "POST", h.HTTPCall.Method)
	require.Equal(t, workflow.Secret("s3cret"), h.HTTPCall.HMACSecret, "the webhook's secret signs the request")
	url, err := h.HTTPCall.URL.String(ev)
	require.NoError(t, err)
	require.Equal(t, "https://ops.example.org/hook", url)
	team, err := h.HTTPCall.Headers["X-Team"].String(ev)
	require.NoError(t, err)
	require.Equal(t, "ops", team)
	auth, err := h.HTTPCall.Headers["Authorization"].String(ev)
	require.NoError(t, err)
	require.Equal(t, "Bearer ${NOT_EXPANDED}", auth, "Monitor sends header values as written")
	body, err := h.HTTPCall.Body.Eval(ev)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"title": "Token Whale Transfers: Transfer(address,address,uint256)",
		"body":  "moved 1234 from 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 to 0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC in 0xfeed",
	}, body, "${events.0.args.value}, ${event_0_to} (the flat form) and ${transaction.hash}")
	require.NotNil(t, h.Retry)
	require.Equal(t, 4, h.Retry.MaxAttempts, "Monitor's 3 retries")

	g := b.project.Workflow("treasury-guard-transfer")
	ids := []string{}
	for _, s := range g.Steps {
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{"treasury_slack", "treasury_discord", "treasury_telegram"}, ids, "email and script are left out")

	slack, err := g.Steps[0].Notify.Text.String(ev)
	require.NoError(t, err)
	require.Equal(t, "*Treasury guard fired*\n\nvalue 1234, sent by ${transaction.from}"+
		"\n\n*Matched Events:*\n\n*Reason 1*\n\n*Signature:* `Transfer(address,address,uint256)`\n\n*Params:*\n"+
		"\nfrom: `0x70997970C51812dc3A010C7d01b50e0d17dc79C8`\nto: `0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC`\nvalue: `1234`", slack)
	require.Equal(t, workflow.NotifySlack, g.Steps[0].Notify.Format)

	discord, err := g.Steps[1].Notify.Text.String(ev)
	require.NoError(t, err)
	require.Equal(t, "*Heads up*\n\n1234 tokens, costs ${HOME} nothing", discord, "text that is no variable stays as written")
	require.Equal(t, 2, g.Steps[1].Retry.MaxAttempts, "retry_policy.max_retries: 1")

	tg := g.Steps[2].HTTPCall
	tgURL, err := tg.URL.String(ev)
	require.NoError(t, err)
	require.Equal(t, "https://api.telegram.org/bot123456:TESTTOKENabcdefghijklmnop/sendMessage", tgURL)
	tgBody, err := tg.Body.Eval(ev)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"chat_id": "-100777", "parse_mode": "MarkdownV2", "disable_web_page_preview": true,
		"text": "*Treasury \\(v2\\)* \n\nmoved 1234\\. [tx](https://sepolia\\.example\\.org/tx/0xfeed)",
	}, tgBody, "escaped for MarkdownV2 as Monitor does")
}

func TestImportReportsWhatIsLeftOut(t *testing.T) {
	t.Parallel()
	b := setupImport(t)
	var left []string
	for _, f := range b.result.LeftOut() {
		left = append(left, f.What)
	}
	for _, want := range []string{
		"match_conditions.functions[0]: calls of transfer(address,uint256) where value >= 5",
		"match_conditions.transactions[0]: transactions with status Success where value > 0",
		"trigger_conditions[0]: filter script ./config/filters/only_business_hours.sh (Bash)",
		"address 0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC on sepolia_ops has no contract_spec",
		"network stellar_sandbox (networks/stellar_sandbox.json): a Stellar network",
		"trigger treasury_slack message.body: ${transaction.from}",
		"trigger treasury_mail: email to cfo@example.org via smtp.example.org",
		"trigger treasury_script: script ./config/triggers/scripts/page.py (Python)",
		"network stellar_sandbox: a Stellar network",
		`match_conditions.events[1] Transfer(address,address,uint256): expression "value > 1.5": column 1: value > 1.5: value is an integer (uint256); Monitor cannot compare it with a fraction either`,
	} {
		require.Contains(t, left, want)
	}
	require.Len(t, left, 10, "and nothing else: %q", left)
	md := b.file(t, "IMPORT.md")
	require.Contains(t, md, "**10 part(s) of the configuration have no rflow equivalent and were left out**")
	require.Contains(t, md, "## Monitor \"Treasury guard\"")
	require.Contains(t, md, "rflow runs no scripts")
	require.Contains(t, md, "X-Rflow-Signature", "the changed signature scheme is listed under Works differently")
	require.Contains(t, md, "trigger spare\\_hook is used by no monitor")
	require.Contains(t, md, "trigger treasury\\_telegram: the bot token is plain text in the Monitor file")
	require.NotContains(t, md, "only\\_business\\_hours.sh is used by no monitor", "a script a monitor names is reported with that monitor")
}

func TestImportNothingLeftOut(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	copyFile(t, "testdata/config/networks/devnet_anvil.json", filepath.Join(src, "networks", "devnet_anvil.json"))
	copyFile(t, "testdata/config/monitors/token_transfers.json", filepath.Join(src, "monitors", "token_transfers.json"))
	copyFile(t, "testdata/config/triggers/hooks.json", filepath.Join(src, "triggers", "hooks.json"))
	writeFile(t, filepath.Join(src, "filters", "spare.sh"), "exit 0")
	dir := filepath.Join(t.TempDir(), "out")
	r, err := ozimport.Import(src, dir, ozimport.Options{})
	require.NoError(t, err)
	require.Empty(t, r.LeftOut())
	require.Len(t, r.Workflows, 2)
	var notes []string
	for _, f := range r.Findings {
		notes = append(notes, f.What)
	}
	require.Contains(t, notes, "filter script filters/spare.sh is used by no monitor's trigger_conditions", "an unused script is still mentioned")

	_, err = ozimport.Import(src, dir, ozimport.Options{})
	require.ErrorContains(t, err, "is not empty")
	_, err = ozimport.Import(src, dir, ozimport.Options{Force: true})
	require.NoError(t, err)
}

// A monitor whose event conditions have no contract to watch is reported,
// not silently skipped.
func TestImportReportsConditionsWithoutContract(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	copyFile(t, "testdata/config/networks/devnet_anvil.json", filepath.Join(src, "networks", "devnet_anvil.json"))
	writeFile(t, filepath.Join(src, "monitors", "m.json"), `{"name": "Nowhere", "paused": false, "networks": ["devnet_anvil"], "addresses": [],
		"match_conditions": {"functions": [], "events": [{"signature": "Transfer(address,address,uint256)", "expression": null}], "transactions": []},
		"trigger_conditions": [], "triggers": []}`)
	r, err := ozimport.Import(src, filepath.Join(t.TempDir(), "out"), ozimport.Options{})
	require.NoError(t, err)
	require.Empty(t, r.Workflows)
	require.Len(t, r.LeftOut(), 1)
	require.Contains(t, r.LeftOut()[0].What, "match_conditions.events[0] Transfer(address,address,uint256): the monitor watches no EVM address")
}

// Names rflow would refuse are made valid: a monitor name past rflow's 100
// characters, and trigger keys that map to the same step id.
func TestImportMakesNamesValid(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	copyFile(t, "testdata/config/networks/devnet_anvil.json", filepath.Join(src, "networks", "devnet_anvil.json"))
	mon, err := os.ReadFile("testdata/config/monitors/token_transfers.json")
	require.NoError(t, err)
	long := strings.Repeat("Very long monitor name ", 8)
	m := strings.Replace(string(mon), `"Token Whale Transfers"`, `"`+long+`"`, 1)
	m = strings.Replace(m, `"triggers": ["ops_hook"]`, `"triggers": ["page-ops", "page_ops"]`, 1)
	writeFile(t, filepath.Join(src, "monitors", "m.json"), m)
	hook := `{"name": "P", "trigger_type": "discord", "config": {"discord_url": {"type": "plain", "value": "https://discord.example/x"}, "message": {"title": "t", "body": "b"}}}`
	writeFile(t, filepath.Join(src, "triggers", "t.json"), `{"page-ops": `+hook+`, "page_ops": `+hook+`}`)
	r, err := ozimport.Import(src, filepath.Join(t.TempDir(), "out"), ozimport.Options{})
	require.NoError(t, err, "the project validates")
	require.Len(t, r.Workflows, 2)
	for _, w := range r.Workflows {
		require.LessOrEqual(t, len(w.Name), 100)
	}
	body, err := os.ReadFile(filepath.Join(r.Dir, r.Workflows[0].File))
	require.NoError(t, err)
	require.Contains(t, string(body), `id: "page_ops"`)
	require.Contains(t, string(body), `id: "page_ops_2"`)
}

func TestImportRejectsInvalidInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, body string
		file2, body2     string
		wantFile         string
		wantField        string
		wantMsg          string
	}{
		{name: "bad json", file: "networks/a.json", body: "{\n  \"slug\": \"a\",\n  oops\n}",
			wantFile: "networks/a.json", wantMsg: "invalid JSON"},
		{name: "wrong type", file: "networks/a.json", body: `{"network_type": "EVM", "slug": "a", "name": "A", "chain_id": "one", "rpc_urls": []}`,
			wantFile: "networks/a.json", wantField: "chain_id", wantMsg: "want a number, got a JSON string"},
		{name: "unknown field", file: "networks/a.json", body: `{"network_type": "EVM", "slug": "a", "chainid": 1}`,
			wantFile: "networks/a.json", wantField: "chainid", wantMsg: "unknown field"},
		{name: "no rpc", file: "networks/a.json", body: `{"network_type": "EVM", "slug": "a", "name": "A", "chain_id": 1, "rpc_urls": []}`,
			wantFile: "networks/a.json", wantField: "rpc_urls", wantMsg: "at least one RPC URL"},
		{name: "secret type", file: "networks/a.json", body: `{"network_type": "EVM", "slug": "a", "name": "A", "chain_id": 1, "rpc_urls": [{"type_": "rpc", "url": {"type": "file", "value": "x"}, "weight": 1}]}`,
			wantFile: "networks/a.json", wantField: "rpc_urls[0].url", wantMsg: `type "file"`},
		{name: "bad abi", file: "monitors/m.json", body: `{"name": "m", "paused": false, "networks": [], "addresses": [{"address": "0x5FbDB2315678afecb367f032d93F642f64180aa3", "contract_spec": [{"type": "event", "name": "X", "inputs": [{"name": "a", "type": "banana"}]}]}], "match_conditions": {"functions": [], "events": [], "transactions": []}, "trigger_conditions": [], "triggers": []}`,
			wantFile: "monitors/m.json", wantField: "addresses[0].contract_spec", wantMsg: "not a valid EVM ABI"},
		{name: "unknown network", file: "monitors/m.json", body: `{"name": "m", "paused": false, "networks": ["nowhere"], "addresses": [], "match_conditions": {"functions": [], "events": [], "transactions": []}, "trigger_conditions": [], "triggers": []}`,
			wantFile: "monitors/m.json", wantField: "networks[0]", wantMsg: `no network with slug "nowhere"`},
		{name: "unknown trigger", file: "monitors/m.json", body: `{"name": "m", "paused": false, "networks": [], "addresses": [], "match_conditions": {"functions": [], "events": [], "transactions": []}, "trigger_conditions": [], "triggers": ["ghost"]}`,
			wantFile: "monitors/m.json", wantField: "triggers[0]", wantMsg: `no trigger "ghost"`},
		{name: "trigger type", file: "triggers/t.json", body: `{"x": {"name": "X", "trigger_type": "pager", "config": {}}}`,
			wantFile: "triggers/t.json", wantField: "x.trigger_type", wantMsg: `"pager"`},
		{name: "trigger config field", file: "triggers/t.json", body: `{"x": {"name": "X", "trigger_type": "slack", "config": {"slack_url": {"type": "plain", "value": "u"}, "mesage": {}}}}`,
			wantFile: "triggers/t.json", wantField: "x.config.mesage", wantMsg: "unknown field"},
		{name: "duplicate trigger", file: "triggers/a.json", body: `{"x": {"name": "X", "trigger_type": "script", "config": {"language": "Bash", "script_path": "s.sh", "timeout_ms": 1}}}`,
			file2: "triggers/b.json", body2: `{"x": {"name": "X", "trigger_type": "script", "config": {"language": "Bash", "script_path": "s.sh", "timeout_ms": 1}}}`,
			wantFile: "triggers/b.json", wantField: "x", wantMsg: "also defined in triggers/a.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := t.TempDir()
			writeFile(t, filepath.Join(src, tc.file), tc.body)
			if tc.file2 != "" {
				writeFile(t, filepath.Join(src, tc.file2), tc.body2)
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := ozimport.Import(src, out, ozimport.Options{})
			var ie *ozimport.InputError
			require.True(t, errors.As(err, &ie), "%v", err)
			require.Equal(t, tc.wantFile, ie.File)
			require.Equal(t, tc.wantField, ie.Field)
			require.Contains(t, ie.Msg, tc.wantMsg)
			_, statErr := os.Stat(out)
			require.True(t, errors.Is(statErr, os.ErrNotExist), "nothing is written for invalid input")
		})
	}
}

func TestInputErrorNamesPosition(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "networks", "a.json"), "{\n  \"network_type\": \"EVM\",\n  \"chain_id\": true\n}")
	_, err := ozimport.Import(src, filepath.Join(t.TempDir(), "out"), ozimport.Options{})
	require.EqualError(t, err, "networks/a.json:3:15: chain_id: want a number, got a JSON bool")
}

// transfer is a decoded Transfer(from, to, value) log in tx 0xfeed.
func transfer(from string, value int64) workflow.Env {
	return workflow.Env{"event": map[string]any{
		"from": from, "to": "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", "value": big.NewInt(value),
		"block": uint64(7), "block_hash": "0xb10c", "tx_hash": "0xfeed", "log_index": uint64(0),
		"address": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
	}}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	writeFile(t, to, strings.TrimSpace(string(data)))
}
