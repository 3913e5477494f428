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
