package console_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
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
`

// TestConsoleApprovals: a run waiting for approval shows its gate (the
// prepared transaction) on the approvals page and its run page; approving
// it there sends once and records the decision, which the run page shows.
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
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	backends, release, err := jobs.DialBackends(ctx, p, nil)
	require.NoError(t, err)
	t.Cleanup(release)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: p, FetchCooldown: time.Millisecond, Backends: backends})
	require.NoError(t, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	require.NoError(t, e.Start(runCtx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		_ = e.Stop(sctx)
		cancel()
	})
	srv, err := server.New(server.Config{Pool: pool, Engine: e, APIToken: testToken})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b := &bundle{pool: pool, e: e, srv: ts}

	nonce := func() uint64 {
		n, err := node.Client().NonceAt(ctx, from, nil)
		require.NoError(t, err)
		return n
	}
	start := nonce()
	id := b.startRun(t, "gated")
	b.waitRun(t, id, store.RunWaitingApproval, 1)

	br.open(ts.URL+"/ui/approvals", "#token")
	br.do(chromedp.SendKeys(chromedp.CSS("#token"), testToken))
	br.submit("#login", "section.approval")
	card := br.text("section.approval")
	require.Contains(t, card, "pending")
	require.Contains(t, card, `"value": "2000000000"`)
	require.Contains(t, card, id.String())

	br.open(ts.URL+"/ui/runs/"+id.String(), "section.approval")
	require.Equal(t, "waiting_approval", br.text("#run-status"))
	br.do(chromedp.SendKeys(chromedp.CSS("form.decide input[name=reason]"), "fine by me"))
	br.submit("button.approve", "#run-status")
	b.waitRun(t, id, store.RunCompleted, 1)
	require.Equal(t, start+1, nonce(), "one send")
	br.open(ts.URL+"/ui/runs/"+id.String(), "p.decision")
	require.Contains(t, br.text("p.decision"), "approved by console at")
	require.Contains(t, br.text("p.decision"), "fine by me")
	require.Equal(t, "completed", br.text("#run-status"))
}
