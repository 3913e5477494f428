package jobs_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
)

// TestApprovalNoticeAmounts: the notice of a gated send says its value in
// the network's currency (currency: on the network) with the wei beside
// it, and the summary keeps the raw integer as it was.
func TestApprovalNoticeAmounts(t *testing.T) {
	t.Parallel()
	tmpl := strings.Replace(gatedProject, "block_poll_interval: 100ms }",
		"block_poll_interval: 100ms, currency: { symbol: POL, decimals: 18 } }", 1)
	require.NotEqual(t, gatedProject, tmpl)
	b := startGatesWith(t, tmpl, "1h", "reject")

	ap := b.parked(t, b.pay(t, "units", 29200000000000000, "", ""))
	sum, err := jobs.DecodeApprovalSummary(ap.Summary)
	require.NoError(t, err)
	require.Equal(t, "29200000000000000", sum.Value, "the raw field keeps its type and value")
	require.Equal(t, "0.0292 POL (29200000000000000 wei)", sum.ValueText)
	require.Eventually(t, func() bool { return len(b.recv.got("/page")) == 1 }, 10*time.Second, 20*time.Millisecond)
	var page struct {
		Text    string `json:"text"`
		Summary struct {
			Value     string `json:"value"`
			ValueText string `json:"value_text"`
		} `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.recv.got("/page")[0].Body), &page))
	require.Contains(t, page.Text, "waits for approval of step pay: send 0.0292 POL (29200000000000000 wei) to "+
		"0x000000000000000000000000000000000000dEaD from ops on local")
	require.Equal(t, "29200000000000000", page.Summary.Value)
	require.Equal(t, "0.0292 POL (29200000000000000 wei)", page.Summary.ValueText)
}

// TestApprovalSummaryBeforeUnits: a summary stored before value_text
// existed still reads in ETH.
func TestApprovalSummaryBeforeUnits(t *testing.T) {
	t.Parallel()
	sum, err := jobs.DecodeApprovalSummary([]byte(`{"network":"local","wallet":"ops","to":"0xdEaD","value":"1500000000000000000"}`))
	require.NoError(t, err)
	require.Equal(t, "send 1.5 ETH (1500000000000000000 wei) to 0xdEaD from ops on local", sum.OneLine())
	sum, err = jobs.DecodeApprovalSummary([]byte(`{"network":"local","wallet":"ops","to":"0xT","value":"0","contract":"Token",` +
		`"function":"transfer","args":[{"name":"to","type":"address","value":"0xdEaD"},{"name":"amount","type":"uint256","value":"1500000","text":"1.5 USDC (1500000)"}]}`))
	require.NoError(t, err)
	require.Equal(t, "call Token.transfer(0xdEaD, 1.5 USDC (1500000)) from ops on local", sum.OneLine())
}

// tokenCallProject: a gated call of Vault.refund(to, amount) on a contract
// declared a token of 6 decimals (the arguments of startGatesWith, in order).
const tokenCallProject = `
name: gates
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "0x%s" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, token: { symbol: VLT, decimals: 6 } }
notifiers:
  - { name: pager, webhook: "%s/page" }
workflows:
  - name: gated
    trigger: { manual: {} }
    steps:
      - id: pay
        send:
          wallet: ops
          contract: Vault
          function: refund
          args: ["0x000000000000000000000000000000000000dEaD", 1500000]
          approval: { timeout: %s, on_timeout: %s, notify: pager }
`

// TestApprovalNoticeTokenAmount: the amount argument of a gated call on a
// contract with token: reads in the token's unit in the summary and the
// notice; the raw argument stays as it was.
func TestApprovalNoticeTokenAmount(t *testing.T) {
	t.Parallel()
	b := startGatesWith(t, tokenCallProject, "1h", "reject")
	ap := b.parked(t, b.manual(t, "gated", "token", nil))
	sum, err := jobs.DecodeApprovalSummary(ap.Summary)
	require.NoError(t, err)
	require.Len(t, sum.Args, 2)
	require.Equal(t, jobs.ApprovalArg{Name: "amount", Type: "uint256", Value: "1500000", Text: "1.5 VLT (1500000)"}, sum.Args[1])
	require.Empty(t, sum.Args[0].Text, "an address is no amount")
	require.Eventually(t, func() bool { return len(b.recv.got("/page")) == 1 }, 10*time.Second, 20*time.Millisecond)
	var page struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.recv.got("/page")[0].Body), &page))
	require.Contains(t, page.Text, "call Vault.refund(0x000000000000000000000000000000000000dEaD, 1.5 VLT (1500000)) from ops on local")
}
