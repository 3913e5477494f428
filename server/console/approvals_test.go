package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

const gatedProject = `name: consolegates
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "0x%s" }
workflows:
  - name: gated
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(2) }}", approval: {} }
api:
  tokens:
    - { name: ci, token: "${CONSOLE_CI_TOKEN:-` + readToken + `}", roles: [read, deploy] }
`

// TestConsoleApprovals: a run waiting for approval shows its gate (the
// prepared transaction) on the approvals page and its run page; a token
// without the approve role sees no decision forms (and a forged one is
// refused); approving it there sends once and records the decision, which
// the run page shows.
func TestConsoleApprovals(t *testing.T) {
	t.Parallel()
	br := browser(t)
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	_, from := anviltest.Key(t, 4)
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(gatedProject, node.URL, anviltest.DevKeys[4])), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	b := serve(t, p)

	nonce := func() uint64 {
		n, err := node.Client().NonceAt(ctx, from, nil)
		require.NoError(t, err)
		return n
	}
	start := nonce()
	id := b.startRun(t, "gated")
	b.waitRun(t, id, store.RunWaitingApproval, 1)

	// A read token sees the gate, without Approve or Reject.
	br.login(b.srv.URL, readToken, "table.runs")
	br.open(b.srv.URL+"/ui/approvals", "section.approval")
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('form.decide, button.approve').length`)))
	apID := run(br, chromedp.AttributeValue(chromedp.CSS("section.approval"), "data-approval")).Value
	csrf := run(br, chromedp.AttributeValue(chromedp.CSS(`.logout input[name=csrf]`), "value")).Value
	code := br.fetchStatus("/ui/approvals/"+apID+"/approve",
		fmt.Sprintf(`{method: 'POST', body: new URLSearchParams({csrf: %q, key: %q})}`, csrf, uuid.NewString()))
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, start, nonce(), "a read token's forged approval sent nothing")
	br.submit(".logout button", "#token")

	br.open(b.srv.URL+"/ui/approvals", "#token")
	br.do(chromedp.SendKeys(chromedp.CSS("#token"), testToken))
	br.submit("#login", "section.approval")
	card := br.text("section.approval")
	require.Contains(t, card, "pending")
	require.Contains(t, card, `"value": "2000000000"`)
	require.Contains(t, card, id.String())

	br.open(b.srv.URL+"/ui/runs/"+id.String(), "section.approval")
	require.Equal(t, "waiting_approval", br.text("#run-status"))
	br.do(chromedp.SendKeys(chromedp.CSS("form.decide input[name=reason]"), "fine by me"))
	br.submit("button.approve", "#run-status")
	b.waitRun(t, id, store.RunCompleted, 1)
	require.Equal(t, start+1, nonce(), "one send")
	br.open(b.srv.URL+"/ui/runs/"+id.String(), "p.decision")
	require.Contains(t, br.text("p.decision"), "approved by RFLOW_API_TOKEN at")
	require.Contains(t, br.text("p.decision"), "fine by me")
	require.Equal(t, "completed", br.text("#run-status"))
}
