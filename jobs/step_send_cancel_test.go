package jobs_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"fmt"
	"maps"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// holdMethod makes the proxy answer method's calls with "header not found", as
// a node that cannot answer them yet does (on), or pass them on (off).
func holdMethod(p *rpcproxy.Proxy, method string, on bool) {
	p.Update(func(f *rpcproxy.Faults) {
		refuse := maps.Clone(f.Refuse)
		if refuse == nil {
			refuse = map[string]string{}
		}
		if on {
			refuse[method] = "header not found"
		} else {
			delete(refuse, method)
		}
		f.Refuse = refuse
	})
}

// sendProject's workflow pay sends 1 gwei from wallet ops (key) to `to`,
// over rpc, with the step's retry policy retry (YAML, or empty).
const sendProject = `
name: cancels
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1 }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: %q, value: "${{ gwei(1) }}" }
        %s
`

type sendBundle struct {
	*testBundle
	from common.Address
	to   common.Address
}

// startSend deploys sendProject with a fresh wallet (funded with wei on
// node) and starts an engine on a fresh database.
func startSend(t *testing.T, node *anviltest.Node, rpc string, wei *big.Int, retry string) *sendBundle {
	t.Helper()
	return startSendProject(t, node, rpc, wei, sendProject, retry)
}

// startSendProject is startSend with another project of sendProject's
// shape (its verbs in the same order).
func startSendProject(t *testing.T, node *anviltest.Node, rpc string, wei *big.Int, projectFmt, retry string) *sendBundle {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	to := crypto.PubkeyToAddress(mustKey(t).PublicKey)
	node.Call(nil, "anvil_setBalance", from, "0x"+wei.Text(16))
	project := chainProject(t, fmt.Sprintf(projectFmt, rpc, "0x"+hex.EncodeToString(crypto.FromECDSA(key)), to.Hex(), retry), nil)
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond,
		SendPollInterval: 50 * time.Millisecond})
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &sendBundle{testBundle: &testBundle{pool: pool, engine: e, project: project}, from: from, to: to}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	return k
}

// cancel cancels the run the way `rflow runs cancel` does: through an
// engine with no node connections, in one transaction.
func (b *sendBundle) cancel(t *testing.T, id uuid.UUID) *store.Run {
	t.Helper()
	e, err := jobs.NewEngine(jobs.Config{Pool: b.pool, Project: b.project})
	require.NoError(t, err)
	var run *store.Run
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		run, err = e.CancelRunTx(context.Background(), tx, id)
		return err
	}))
	return run
}

// relayerTx is the send row of the run's step pay at attempt.
type relayerTx struct {
	status string
	nonce  *int64
	noops  int // no-op replacements the node accepted
}

func (b *sendBundle) relayerTx(t *testing.T, run uuid.UUID, attempt int) (relayerTx, bool) {
	t.Helper()
	var r relayerTx
	err := b.pool.QueryRow(context.Background(), `
		SELECT t.status, t.nonce, (SELECT count(*) FROM relayer.broadcasts b
			WHERE b.tx_id = t.tx_id AND b.kind = 'cancel' AND b.sent_at IS NOT NULL)
		FROM relayer.transactions t WHERE external_id = $1`,
		fmt.Sprintf("rflow:%s:pay:%d", run, attempt)).Scan(&r.status, &r.nonce, &r.noops)
	if err == pgx.ErrNoRows {
		return r, false
	}
	require.NoError(t, err)
	return r, true
}

func (b *sendBundle) waitTx(t *testing.T, run uuid.UUID, what string, cond func(relayerTx) bool) relayerTx {
	t.Helper()
	var got relayerTx
	require.Eventually(t, func() bool {
		r, ok := b.relayerTx(t, run, 1)
		got = r
		return ok && cond(r)
	}, 30*time.Second, 20*time.Millisecond, "send of run %s: %s (last %+v)", run, what, got)
	return got
}

// TestCancelBroadcastSendReplacesWithNoop: with automine off the run's
// transaction sits in the mempool; `runs cancel` (no node connection)
// records the cancel and says plainly that the original may still move
// value; the running process's relayer replaces it with a same-nonce
// no-op, which is mined: the nonce is consumed by the no-op, the
// recipient never gets the value, and the step's journal says so.
func TestCancelBroadcastSendReplacesWithNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{NoMining: true})
	b := startSend(t, node, node.URL, big.NewInt(1e18), "")
	client := node.Client()

	id := b.manual(t, "pay", "cancel-broadcast", nil)
	sent := b.waitTx(t, id, "in the mempool", func(r relayerTx) bool { return r.status == store.RelayerInMempool })
	require.NotNil(t, sent.nonce)

	run := b.cancel(t, id)
	require.Equal(t, store.RunCancelled, run.Status)
	require.NotNil(t, run.Error)
	require.Contains(t, *run.Error, "pay: cancel: tx broadcast at nonce 0")
	require.Contains(t, *run.Error, "the original may still be mined")

	b.waitTx(t, id, "no-op accepted", func(r relayerTx) bool { return r.noops > 0 })
	node.Mine(1)
	b.waitTx(t, id, "cancelled", func(r relayerTx) bool { return r.status == store.RelayerCancelled })

	nonce, err := client.NonceAt(ctx, b.from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), nonce, "the no-op consumed the nonce")
	node.Mine(2)
	bal, err := client.BalanceAt(ctx, b.to, nil)
	require.NoError(t, err)
	require.Zero(t, bal.Sign(), "the original's value never moved")

	step := b.steps(t, id)["pay"]
	require.Equal(t, store.StepCancelled, step.Status)
	require.NotNil(t, step.Error)
	require.Contains(t, *step.Error, "cancel: the no-op replacement was mined at nonce 0")
	out, err := workflow.UnmarshalJSON(step.Output)
	require.NoError(t, err)
	require.Equal(t, "cancelled", out.(map[string]any)["status"])
	require.Contains(t, out.(map[string]any)["cancel"], "no-op replacement was mined")
	final, err := store.GetRun(ctx, b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, final.Status)
	require.Contains(t, *final.Error, "the original's value did not move")

	again := b.cancel(t, id)
	require.Equal(t, *final.Error, *again.Error, "a repeated cancel answers the recorded outcome")
}

// TestCancelBeforeBroadcastSendsNothing: the node cannot estimate the send
// yet, so it has no nonce when the run is cancelled: the reply says the tx
// was not sent, and once the node answers again the relayer ends it
// cancelled without signing anything: no eth_sendRawTransaction, the
// wallet's nonce unchanged.
func TestCancelBeforeBroadcastSendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	proxy := rpcproxy.Start(t, node.URL)
	holdMethod(proxy, "eth_estimateGas", true)
	b := startSend(t, node, proxy.URL, big.NewInt(1e18), "")

	id := b.manual(t, "pay", "cancel-early", nil)
	b.waitTx(t, id, "queued", func(r relayerTx) bool { return r.status == store.RelayerPending && r.nonce == nil })
	require.Eventually(t, func() bool { return proxy.Calls("eth_estimateGas") > 1 }, 30*time.Second, 20*time.Millisecond)

	run := b.cancel(t, id)
	require.Equal(t, store.RunCancelled, run.Status)
	require.NotNil(t, run.Error)
	require.Contains(t, *run.Error, "pay: cancel: tx not sent")

	holdMethod(proxy, "eth_estimateGas", false)
	got := b.waitTx(t, id, "cancelled", func(r relayerTx) bool { return r.status == store.RelayerCancelled })
	require.Nil(t, got.nonce, "never given a nonce")
	require.Zero(t, proxy.Calls("eth_sendRawTransaction"), "nothing was broadcast")
	nonce, err := node.Client().NonceAt(ctx, b.from, nil)
	require.NoError(t, err)
	require.Zero(t, nonce)
	require.Eventually(t, func() bool {
		s := b.steps(t, id)["pay"]
		return s.Error != nil && *s.Error == "cancel: tx not sent; nothing moved"
	}, 10*time.Second, 20*time.Millisecond)
}

// TestUnpayableSendFailsAttemptsThenDeadLetters: a wallet holding the
// value but not the gas: each attempt is refused by the node and fails at
// once with the reason (one broadcast per attempt); the step's retry policy
// makes a new attempt (a new send), then the run dead-letters. No nonce
// leaks: funded, the wallet's next send uses nonce 0.
func TestUnpayableSendFailsAttemptsThenDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	proxy := rpcproxy.Start(t, node.URL)
	b := startSend(t, node, proxy.URL, big.NewInt(10_000_000_000_000), // 10,000 gwei: the value, not the gas
		"retry: { max_attempts: 3, backoff: fixed, delay: 100ms }")

	start := time.Now()
	run := b.waitRun(t, b.manual(t, "pay", "broke", nil))
	require.Equal(t, store.RunFailed, run.Status)
	require.Less(t, time.Since(start), 15*time.Second)
	require.Contains(t, *run.Error, "insufficient funds for gas * price + value: wallet "+b.from.Hex()+" has 10000000000000 wei, needs")
	step := b.steps(t, run.ID)["pay"]
	require.Equal(t, 3, step.Attempt)
	require.Equal(t, store.StepFailed, step.Status)
	require.Equal(t, 3, proxy.Calls("eth_sendRawTransaction"), "one refused broadcast per attempt")
	for a := 1; a <= 3; a++ {
		r, ok := b.relayerTx(t, run.ID, a)
		require.True(t, ok, "attempt %d has its own send", a)
		require.Equal(t, store.RelayerFailed, r.status)
	}

	node.Call(nil, "anvil_setBalance", b.from, "0xde0b6b3a7640000")
	ok := b.waitRun(t, b.manual(t, "pay", "funded", nil))
	require.Equal(t, store.RunCompleted, ok.Status, "run error: %v", ok.Error)
	r, _ := b.relayerTx(t, ok.ID, 1)
	require.NotNil(t, r.nonce)
	require.Zero(t, *r.nonce, "the refused attempts gave their nonce back")
	nonce, err := node.Client().NonceAt(ctx, b.from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), nonce)
}
