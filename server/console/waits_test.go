package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// No chain is reached: the wait parks on its conditions alone.
const waitProject = `name: consolewaits
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 2 }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "0x00000000000000000000000000000000000000aa" }
workflows:
  - name: await
    trigger: { manual: {} }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == 7 }}" }
          timeout: 1h
      - { id: after, delay: 1ms }
`

// TestConsoleWaitsAndReorgs: a run parked on a wait_for shows its wait
// (event, where, deadline, status) on its run page; a run whose orphaning
// started an on_reorg response shows the response, and the runs list's
// compensated filter keeps it and leaves the other run out.
func TestConsoleWaitsAndReorgs(t *testing.T) {
	t.Parallel()
	br := browser(t)
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(waitProject), 0o600))
	p, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{})
	require.NoError(t, err)
	b := serve(t, p)

	parked := b.startRun(t, "await")
	b.waitRun(t, parked, store.RunWaitingEvent, 1)

	// An event run whose log a reorg orphaned, its on_reorg response
	// started: the reorg's transaction, by hand (no chain here).
	var orphaned uuid.UUID
	var response uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		orphaned, _, err = b.e.StartRunTx(ctx, tx, store.Claim{Workflow: "await", TriggerKey: "0xabc:0", TriggerKind: trigger.Event,
			Trigger: []byte(`{}`), ChainID: 31337, BlockNumber: 40, BlockHash: "0xold"})
		if err != nil {
			return err
		}
		ids, err := store.OpenResponses(ctx, tx, store.ReorgResponses{ChainID: 31337, ForkBlock: 40, Depth: 3,
			OldHash: "0xold", NewHash: "0xnew", Confirmations: 2}, []uuid.UUID{orphaned})
		if err != nil || len(ids) != 1 {
			return fmt.Errorf("open response: %v (%d)", err, len(ids))
		}
		response = ids[0]
		_, err = store.EndResponse(ctx, tx, response, true)
		return err
	}))

	br.open(b.srv.URL+"/ui/runs/"+parked.String(), "#token")
	br.do(chromedp.SendKeys(chromedp.CSS("#token"), testToken))
	br.submit("#login", `tr.wait[data-step="claimed"]`)
	require.Equal(t, "waiting_event", br.text("#run-status"))
	wait := br.text(`tr.wait[data-step="claimed"]`)
	require.Contains(t, wait, "Vault.Claimed")
	require.Contains(t, wait, "event.amount == 7")
	require.Contains(t, wait, "waiting")
	require.Contains(t, wait, "fail", "on_timeout")
	w, err := store.RunWaits(ctx, b.pool, parked)
	require.NoError(t, err)
	require.Len(t, w, 1)
	require.Equal(t, w[0].Deadline.UTC().Format("2006-01-02 15:04:05.000"), br.text(`tr.wait[data-step="claimed"] td.deadline`))
	br.noOverflow("a run page with a wait")

	sel := fmt.Sprintf(`section.reorg[data-response="%s"]`, response)
	br.open(b.srv.URL+"/ui/runs/"+orphaned.String(), sel)
	reorg := br.text(sel)
	require.Contains(t, reorg, "fork at block 40, depth 3")
	require.Contains(t, reorg, "0xold")
	require.Contains(t, reorg, "0xnew")
	require.Contains(t, reorg, "decided at block 42")
	require.Contains(t, reorg, "queued")

	// The compensated filter, from the runs page's form.
	br.open(b.srv.URL+"/ui/", "#filter-compensated")
	br.do(chromedp.Click(chromedp.CSS("#filter-compensated")))
	br.submit("#filter", "table.runs")
	require.Contains(t, br.location(), "compensated=true")
	list := br.text("table.runs")
	require.Contains(t, list, orphaned.String())
	require.NotContains(t, list, parked.String())
	require.True(t, run(br, chromedp.Evaluate[bool](`document.querySelector('#filter-compensated').checked`)))
}
