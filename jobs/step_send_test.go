package jobs_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// TestSendStep: a send parks the run as waiting_tx, the relayer broadcasts
// exactly one transaction, and the run resumes with the receipt in the step
// output. A reverting call fails the step with the reason and sends nothing.
func TestSendStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	_, from := anviltest.Key(t, 1)

	project := chainProject(t, fmt.Sprintf(`
name: sends
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "${OPS_KEY}" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(3) }}", confirmations: 1 }
      - id: refund
        send:
          wallet: ops
          network: local
          contract: Vault
          function: refund
          args: ["0x000000000000000000000000000000000000dEaD", "${{ trigger.input.amount }}"]
      - id: tell
        http_call: { method: POST, url: "%[3]s/sent", body: "${{ steps.pay.output.hash }}" }
`, node.URL, em.Address.Hex(), recv.URL), func(k string) (string, bool) {
		if k == "OPS_KEY" {
			return anviltest.DevKeys[1], true
		}
		return os.LookupEnv(k)
	})
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngine(t, pool, url, project)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	b := &testBundle{pool: pool, engine: e, project: project, recv: recv}

	client := node.Client()
	before, err := client.NonceAt(ctx, from, nil)
	require.NoError(t, err)

	ok := b.waitRun(t, b.manual(t, "pay", "ok", map[string]any{"amount": 7}))
	if ok.Status != store.RunCompleted {
		t.Fatalf("run failed: %s", *ok.Error)
	}
	steps := b.steps(t, ok.ID)
	out, err := workflow.UnmarshalJSON(steps["pay"].Output)
	require.NoError(t, err)
	pay := out.(map[string]any)
	require.Equal(t, "confirmed", pay["status"])
	require.Equal(t, pay["hash"], recv.got("/sent")[0].Body)
	after, err := client.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, before+2, after, "exactly one transaction per send step")

	bad := b.waitRun(t, b.manual(t, "pay", "bad", map[string]any{"amount": 5000}))
	require.Equal(t, store.RunFailed, bad.Status)
	require.Contains(t, *bad.Error, "insufficient assets")
	final, err := client.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, after+1, final, "the reverting refund sent nothing (only the first send went out)")
}

// payProject's workflow pay sends 1 gwei to 0xdEaD from wallet ops.
const payProject = `
name: pay
networks:
  - { name: local, chain_id: 31337, rpc: [%s], confirmations: 1 }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}" }
`

// startPay deploys payProject, over the rpc: URLs rpcs with dev key key as
// the wallet, on a fresh database and starts an engine with cfg's options.
// It returns the bundle and the wallet's address.
func startPay(t *testing.T, rpcs []string, key int, cfg jobs.Config) (*testBundle, common.Address) {
	t.Helper()
	quoted := make([]string, len(rpcs))
	for i, u := range rpcs {
		quoted[i] = strconv.Quote(u)
	}
	_, from := anviltest.Key(t, key)
	project := chainProject(t, fmt.Sprintf(payProject, strings.Join(quoted, ", "), "0x"+anviltest.DevKeys[key]), nil)
	cfg.URL = storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), cfg.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool, cfg.Project, cfg.FetchCooldown = pool, project, time.Millisecond
	e := startEngineWith(t, cfg)
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &testBundle{pool: pool, engine: e, project: project}, from
}

// TestSendDryRun: in dry-run mode a send stops before the relayer
// broadcasts; the step completes with the simulated result and the
// wallet's nonce does not move.
func TestSendDryRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	b, from := startPay(t, []string{node.URL}, 3, jobs.Config{DryRun: true})

	before, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)
	run := b.waitRun(t, b.manual(t, "pay", "dry", nil))
	require.Equal(t, store.RunCompleted, run.Status)
	out, err := workflow.UnmarshalJSON(b.steps(t, run.ID)["pay"].Output)
	require.NoError(t, err)
	pay := out.(map[string]any)
	require.Equal(t, "simulated", pay["status"])
	require.Equal(t, true, pay["dry_run"])
	require.NotNil(t, pay["simulation"])
	after, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing was broadcast")
}

// TestSendFailsOverToTheNextRPC: the network's first rpc: URL is a closed
// port; the send goes out through the second (a live anvil) and the run
// completes with its receipt.
func TestSendFailsOverToTheNextRPC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	b, from := startPay(t, []string{"http://" + anviltest.DeadAddr(t), node.URL}, 4, jobs.Config{})

	before, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)
	run := b.waitRun(t, b.manual(t, "pay", "failover", nil))
	require.Equal(t, store.RunCompleted, run.Status, "run error: %v", run.Error)
	out, err := workflow.UnmarshalJSON(b.steps(t, run.ID)["pay"].Output)
	require.NoError(t, err)
	require.Equal(t, "confirmed", out.(map[string]any)["status"])
	after, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, before+1, after, "exactly one transaction, through the live node")
}

// TestStartWithoutBackendsRefused: an engine built without the relayer's
// backends (enough to enqueue, as rflow runs retry does) refuses to work a
// project with wallets rather than fail its sends.
func TestStartWithoutBackendsRefused(t *testing.T) {
	t.Parallel()
	project := chainProject(t, fmt.Sprintf(payProject, strconv.Quote("http://"+anviltest.DeadAddr(t)), "0x"+anviltest.DevKeys[1]), nil)
	e, err := jobs.NewEngine(jobs.Config{Pool: storetest.Pool(t), Project: project})
	require.NoError(t, err)
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err, "an engine without backends still deploys and enqueues")
	require.ErrorContains(t, e.Start(context.Background()), "Config.Backends")
}
