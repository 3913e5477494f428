package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

const explorerProject = `name: consoleexplorer
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms, explorer: "https://explorer.example/" }
wallets:
  - { name: ops, private_key: "0x%s" }
workflows:
  - name: gated
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(3) }}", approval: {} }
`

// TestConsoleApprovalsLiveAndExplorer, on anvil: the approvals page, open
// before the run exists, shows its new approval without a reload; once
// approved, the run page links the sent transaction to the network's
// explorer: (the hash anvil mined), and an event run's trigger block too.
func TestConsoleApprovalsLiveAndExplorer(t *testing.T) {
	t.Parallel()
	br := browser(t)
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(explorerProject, node.URL, anviltest.DevKeys[3])), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	b := serve(t, p)

	br.login(b.srv.URL, testToken, "table.runs, p.empty")
	br.open(b.srv.URL+"/ui/approvals", "#approvals-live p.empty")
	br.markPage()
	id := b.startRun(t, "gated")
	br.waitVisible("section.approval")
	require.True(t, br.stillSamePage(), "the approvals page updated by reloading")
	require.Contains(t, br.text("section.approval"), id.String())
	br.noOverflow("the approvals page")
	b.waitRun(t, id, store.RunWaitingApproval, 1)

	br.submit("section.approval button.approve", "#run-status")
	b.waitRun(t, id, store.RunCompleted, 1)
	br.waitVisible("tr.step a.explorer")
	link := run(br, chromedp.AttributeValue(chromedp.CSS("tr.step a.explorer"), "href")).Value
	hash := br.text("tr.step a.explorer")
	require.Equal(t, "https://explorer.example/tx/"+hash, link)
	require.Equal(t, hash, run(br, chromedp.AttributeValue(chromedp.CSS("tr.step a.explorer"), "title")).Value,
		"the full hash is the link's title")
	receipt, err := node.Client().TransactionReceipt(ctx, common.HexToHash(hash))
	require.NoError(t, err, "the linked hash is the transaction anvil mined")
	tx, _, err := node.Client().TransactionByHash(ctx, receipt.TxHash)
	require.NoError(t, err)
	require.Equal(t, "0x000000000000000000000000000000000000dEaD", tx.To().Hex())
	br.waitVisible("tr.step a.explorer-block")
	require.Equal(t, fmt.Sprintf("https://explorer.example/block/%d", receipt.BlockNumber.Int64()),
		run(br, chromedp.AttributeValue(chromedp.CSS("tr.step a.explorer-block"), "href")).Value, "the block that mined it")
	br.noOverflow("a run page with a transaction")

	// An event run's trigger block links to the explorer's block page (the
	// claim is the one an event trigger makes, by hand, at the block that
	// mined the send).
	block := receipt.BlockNumber.Int64()
	event := mustStart(t, b, store.Claim{Workflow: "gated", TriggerKey: receipt.TxHash.Hex() + ":0", TriggerKind: trigger.Event,
		Trigger: []byte(`{}`), ChainID: 31337, BlockNumber: block, BlockHash: receipt.BlockHash.Hex()})
	br.open(b.srv.URL+"/ui/runs/"+event, "#trigger-block")
	require.Equal(t, fmt.Sprintf("https://explorer.example/block/%d", block),
		run(br, chromedp.AttributeValue(chromedp.CSS("#trigger-block"), "href")).Value)
	require.Equal(t, fmt.Sprint(block), strings.TrimSpace(br.text("#trigger-block")))
}

func mustStart(t *testing.T, b *bundle, c store.Claim) string {
	t.Helper()
	var id string
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		rid, _, err := b.e.StartRunTx(context.Background(), tx, c)
		id = rid.String()
		return err
	}))
	return id
}
