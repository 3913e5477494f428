package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

const amountsProject = `name: consoleamounts
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms, currency: { symbol: POL, decimals: 18 } }
wallets:
  - { name: ops, private_key: "0x%s" }
workflows:
  - name: gated
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, to: "0x000000000000000000000000000000000000dEaD", value: "${{ ether('0.0292') }}", approval: {} }
`

// TestConsoleAmounts: in Chromium, the approval card says what its send
// moves in the network's currency (currency: POL) with the wei beside it,
// and once approved the run page shows the sent value the same way.
func TestConsoleAmounts(t *testing.T) {
	t.Parallel()
	br := browser(t)
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(amountsProject, node.URL, anviltest.DevKeys[3])), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	b := serve(t, p)

	id := b.startRun(t, "gated")
	b.waitRun(t, id, store.RunWaitingApproval, 1)
	br.login(b.srv.URL, testToken, "table.runs")
	br.open(b.srv.URL+"/ui/approvals", "section.approval p.moves")
	require.Equal(t, "Sends 0.0292 POL (29200000000000000 wei) to 0x000000000000000000000000000000000000dEaD", br.text("section.approval p.moves"))
	require.Contains(t, br.text("section.approval"), `"value": "29200000000000000"`, "the prepared transaction keeps its raw value")

	br.open(b.srv.URL+"/ui/runs/"+id.String(), "section.approval")
	br.submit("button.approve", "#run-status")
	b.waitRun(t, id, store.RunCompleted, 1)
	br.open(b.srv.URL+"/ui/runs/"+id.String(), `tr.step[data-step="pay"] p.value`)
	require.Equal(t, "value 0.0292 POL (29200000000000000 wei)", br.text(`tr.step[data-step="pay"] p.value`))
	require.Contains(t, br.text(`tr.step[data-step="pay"] p.tx`), "confirmed")
}
