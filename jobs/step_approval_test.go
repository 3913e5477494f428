package jobs_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// gatedProject: workflow gated sends value wei to `to` from wallet ops,
// gated when the amount is over 5; {{TIMEOUT}} and {{ON_TIMEOUT}} set the
// gate's expiry.
const gatedProject = `
name: gates
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "0x%s" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q }
notifiers:
  - { name: pager, webhook: "%s/page" }
workflows:
  - name: gated
    trigger: { manual: {} }
    steps:
      - id: pay
        send:
          wallet: ops
          to: "${{ trigger.input.to }}"
          value: "${{ trigger.input.value }}"
          data: "${{ trigger.input.data }}"
          approval: { required: "${{ trigger.input.amount > 5 }}", timeout: %s, on_timeout: %s, notify: pager }
      - id: after
        http_call: { method: POST, url: "%[4]s/after", body: "${{ steps.pay.output.hash }}" }
`

type gateBundle struct {
	*testBundle
	node *anviltest.Node
	from common.Address
	em   *anviltest.Emitter
}

func startGates(t *testing.T, timeout, onTimeout string) *gateBundle {
	t.Helper()
	return startGatesWith(t, gatedProject, timeout, onTimeout)
}

// startGatesWith is startGates on a variant of gatedProject.
func startGatesWith(t *testing.T, tmpl, timeout, onTimeout string) *gateBundle {
	t.Helper()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	_, from := anviltest.Key(t, 2)
	project := chainProject(t, fmt.Sprintf(tmpl, node.URL, anviltest.DevKeys[2], em.Address.Hex(), recv.URL,
		timeout, onTimeout), os.LookupEnv)
	url := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond})
	_, err = e.SyncWorkflows(context.Background())
	require.NoError(t, err)
	return &gateBundle{testBundle: &testBundle{pool: pool, engine: e, project: project, recv: recv}, node: node, from: from, em: em}
}

func (b *gateBundle) nonce(t *testing.T) uint64 {
	t.Helper()
	n, err := b.node.Client().NonceAt(context.Background(), b.from, nil)
	require.NoError(t, err)
	return n
}

func (b *gateBundle) pay(t *testing.T, key string, amount int64, to, data string) uuid.UUID {
	t.Helper()
	value := amount
	if data != "" {
		value = 0 // a contract call: the Emitter takes no value
	}
	if to == "" {
		to = "0x000000000000000000000000000000000000dEaD"
	}
	if data == "" {
		data = "0x"
	}
	return b.manual(t, "gated", key, map[string]any{"amount": amount, "value": value, "to": to, "data": data})
}

// parked waits for the run to wait on its approval and returns the gate.
func (b *gateBundle) parked(t *testing.T, id uuid.UUID) *store.Approval {
	t.Helper()
	var ap *store.Approval
	require.Eventually(t, func() bool {
		run, err := store.GetRun(context.Background(), b.pool, id, false)
		require.NoError(t, err)
		require.False(t, run.Status.Terminal(), "run %s ended %s before its approval", id, run.Status)
		if run.Status != store.RunWaitingApproval {
			return false
		}
		aps, err := store.ListApprovals(context.Background(), b.pool, store.ApprovalFilter{RunID: id})
		require.NoError(t, err)
		if len(aps) == 1 {
			ap = aps[0]
		}
		return ap != nil
	}, 30*time.Second, 20*time.Millisecond)
	return ap
}

func (b *gateBundle) decide(t *testing.T, id uuid.UUID, d store.ApprovalDecision) (*store.Approval, error) {
	t.Helper()
	var ap *store.Approval
	err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		ap, err = b.engine.DecideApprovalTx(context.Background(), tx, id, d)
		return err
	})
	return ap, err
}

// TestApprovalGate: a gated send parks its run waiting_approval on a row
// holding the prepared transaction and announces it; nothing is sent until
// it is approved, then exactly one transaction goes out. The same decision
// twice changes nothing; a conflicting one is refused. A rejected gate and
// a cancelled run send nothing. A send whose required: is false is not
// gated at all.
func TestApprovalGate(t *testing.T) {
	t.Parallel()
	b := startGates(t, "1h", "reject")
	start := b.nonce(t)

	small := b.waitRun(t, b.pay(t, "small", 3, "", ""))
	require.Equal(t, store.RunCompleted, small.Status, "required: false sends without a gate")
	aps, err := store.ListApprovals(context.Background(), b.pool, store.ApprovalFilter{RunID: small.ID})
	require.NoError(t, err)
	require.Empty(t, aps)
	require.Equal(t, start+1, b.nonce(t))

	runA := b.pay(t, "a", 10, "", "")
	ap := b.parked(t, runA)
	require.Equal(t, store.ApprovalPending, ap.Status)
	require.Equal(t, "pay", ap.StepKey)
	sum, err := jobs.DecodeApprovalSummary(ap.Summary)
	require.NoError(t, err)
	require.Equal(t, "local", sum.Network)
	require.Equal(t, "ops", sum.Wallet)
	require.Equal(t, "10", sum.Value)
	require.Equal(t, common.HexToAddress("0xdEaD").Hex(), sum.To)
	require.NotZero(t, sum.GasEstimate)
	require.NotNil(t, sum.Simulation)
	require.False(t, sum.Simulation.Failed())
	require.WithinDuration(t, time.Now().Add(time.Hour), ap.ExpiresAt, time.Minute)
	require.Eventually(t, func() bool { return len(b.recv.got("/page")) == 1 }, 10*time.Second, 20*time.Millisecond)
	page := b.recv.got("/page")[0].Body
	short := store.ShortID(ap.ID)
	require.Contains(t, page, "rflow approve "+short)
	require.Contains(t, page, "rflow reject "+short)
	require.Contains(t, page, `"value":"10"`)
	time.Sleep(time.Second)
	require.Equal(t, start+1, b.nonce(t), "nothing is sent while the gate is pending")

	got, err := b.decide(t, ap.ID, store.ApprovalDecision{Approve: true, By: "alice", Reason: "ok by me"})
	require.NoError(t, err)
	require.Equal(t, store.ApprovalApproved, got.Status)
	again, err := b.decide(t, ap.ID, store.ApprovalDecision{Approve: true, By: "bob"})
	require.NoError(t, err, "the same decision twice is idempotent")
	require.Equal(t, "alice", *again.DecidedBy, "a repeat records nothing new")
	_, err = b.decide(t, ap.ID, store.ApprovalDecision{Approve: false, By: "bob"})
	var conflict *store.ApprovalConflictError
	require.ErrorAs(t, err, &conflict)
	require.Contains(t, err.Error(), "already approved by alice")
	doneA := b.waitRun(t, runA)
	require.Equal(t, store.RunCompleted, doneA.Status)
	require.Equal(t, start+2, b.nonce(t), "the approved send went out once")
	require.Len(t, b.recv.got("/after"), 2)

	runB := b.pay(t, "b", 11, "", "")
	apB := b.parked(t, runB)
	_, err = b.decide(t, apB.ID, store.ApprovalDecision{Approve: false, By: "carol", Reason: "too big"})
	require.NoError(t, err)
	doneB := b.waitRun(t, runB)
	require.Equal(t, store.RunFailed, doneB.Status)
	require.Contains(t, *doneB.Error, "approval rejected by carol: too big")
	_, err = b.decide(t, apB.ID, store.ApprovalDecision{Approve: true, By: "dave"})
	require.ErrorAs(t, err, &conflict, "approve after reject is a conflict")

	runC := b.pay(t, "c", 12, "", "")
	apC := b.parked(t, runC)
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		_, err := jobs.CancelRun(context.Background(), tx, runC)
		return err
	}))
	apC, err = store.GetApproval(context.Background(), b.pool, apC.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.ApprovalCancelled, apC.Status)
	_, err = b.decide(t, apC.ID, store.ApprovalDecision{Approve: true, By: "erin"})
	require.ErrorAs(t, err, &conflict, "a cancelled run's approval cannot be approved")

	time.Sleep(time.Second)
	require.Equal(t, start+2, b.nonce(t), "rejected and cancelled gates sent nothing")
}

// TestApprovalExpiry: an unanswered gate expires at its timeout. With
// on_timeout: reject the step fails and nothing is sent, and a decision
// after the expiry is refused; with proceed the send goes out.
func TestApprovalExpiry(t *testing.T) {
	t.Parallel()
	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		b := startGates(t, "2s", "reject")
		start := b.nonce(t)
		id := b.pay(t, "late", 10, "", "")
		ap := b.parked(t, id)
		run := b.waitRun(t, id)
		require.Equal(t, store.RunFailed, run.Status)
		require.Contains(t, *run.Error, "expired")
		require.Contains(t, *run.Error, "nothing was sent")
		_, err := b.decide(t, ap.ID, store.ApprovalDecision{Approve: true, By: "late"})
		var conflict *store.ApprovalConflictError
		require.ErrorAs(t, err, &conflict)
		require.Contains(t, err.Error(), "expired")
		ap, err = store.GetApproval(context.Background(), b.pool, ap.ID, false)
		require.NoError(t, err)
		require.Equal(t, store.ApprovalExpired, ap.Status)
		require.Equal(t, "timeout", *ap.DecidedBy)
		require.Equal(t, start, b.nonce(t))
	})
	t.Run("proceed", func(t *testing.T) {
		t.Parallel()
		b := startGates(t, "2s", "proceed")
		start := b.nonce(t)
		id := b.pay(t, "late", 10, "", "")
		b.parked(t, id)
		run := b.waitRun(t, id)
		require.Equal(t, store.RunCompleted, run.Status)
		require.Equal(t, start+1, b.nonce(t))
	})
}

// TestApprovalResimulationRevert: an approved send is simulated again right
// before the hand-off. When the chain changed while the gate waited so that
// the call now reverts, the step fails with the revert reason and nothing
// is sent.
func TestApprovalResimulationRevert(t *testing.T) {
	t.Parallel()
	b := startGates(t, "1h", "reject")
	start := b.nonce(t)
	// refund(dead, 5000) reverts with "insufficient assets" on the
	// Emitter; sent to an address without code it succeeds.
	target := common.HexToAddress("0x00000000000000000000000000000000000b0b00")
	abi := anviltest.EmitterABI(t)
	data, err := abi.Pack("refund", common.HexToAddress("0xdEaD"), big.NewInt(5000))
	require.NoError(t, err)
	id := b.pay(t, "revert", 10, target.Hex(), hexutil.Encode(data))
	ap := b.parked(t, id)
	sum, err := jobs.DecodeApprovalSummary(ap.Summary)
	require.NoError(t, err)
	require.False(t, sum.Simulation.Failed(), "no code at the target yet: the call would succeed")

	var code hexutil.Bytes
	b.node.Call(&code, "eth_getCode", b.em.Address, "latest")
	b.node.Call(nil, "anvil_setCode", target, code)

	_, err = b.decide(t, ap.ID, store.ApprovalDecision{Approve: true, By: "alice"})
	require.NoError(t, err)
	run := b.waitRun(t, id)
	require.Equal(t, store.RunFailed, run.Status)
	require.Contains(t, *run.Error, "re-simulation")
	require.Contains(t, *run.Error, "insufficient assets")
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, start, b.nonce(t), "nothing was sent")
}

// TestApprovalRechecks: an approved send is checked again right before the
// hand-off. A paused workflow holds it until the resume; the budget is
// reserved against the cap as it stands then, so spend that happened while
// the gate waited can refuse it (nothing is sent); a run retried after a
// rejection asks again at its new attempt.
func TestApprovalRechecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	_, from := anviltest.Key(t, 3)
	project := chainProject(t, fmt.Sprintf(`
name: rechecks
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "0x%s" }
workflows:
  - name: capped
    trigger: { manual: {} }
    budgets: [{ name: b, asset: native, cap: "15", window: 1h }]
    steps:
      - id: pay
        send:
          wallet: ops
          to: "0x000000000000000000000000000000000000dEaD"
          value: "${{ trigger.input.amount }}"
          budget: b
          approval: { required: "${{ trigger.input.amount > 5 }}" }
`, node.URL, anviltest.DevKeys[3]), os.LookupEnv)
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond})
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	b := &gateBundle{testBundle: &testBundle{pool: pool, engine: e, project: project}, node: node, from: from}
	start := b.nonce(t)
	run := func(key string, amount int64) uuid.UUID {
		return b.manual(t, "capped", key, map[string]any{"amount": amount})
	}

	runA, runB := run("a", 10), run("b", 10)
	apA, apB := b.parked(t, runA), b.parked(t, runB)
	require.Equal(t, store.RunCompleted, b.waitRun(t, run("small", 3)).Status)
	require.Equal(t, start+1, b.nonce(t))

	require.NoError(t, store.SetWorkflowPaused(ctx, pool, "capped", true))
	_, err = b.decide(t, apA.ID, store.ApprovalDecision{Approve: true, By: "alice"})
	require.NoError(t, err)
	time.Sleep(2 * time.Second)
	require.Equal(t, start+1, b.nonce(t), "a paused workflow holds the approved send")
	r, err := store.GetRun(ctx, pool, runA, false)
	require.NoError(t, err)
	require.False(t, r.Status.Terminal())
	require.NoError(t, store.SetWorkflowPaused(ctx, pool, "capped", false))
	require.Equal(t, store.RunCompleted, b.waitRun(t, runA).Status)
	require.Equal(t, start+2, b.nonce(t), "sent once the workflow was resumed")

	_, err = b.decide(t, apB.ID, store.ApprovalDecision{Approve: true, By: "alice"})
	require.NoError(t, err)
	doneB := b.waitRun(t, runB)
	require.Equal(t, store.RunFailed, doneB.Status, "3 + 10 spent: 10 more is over the cap of 15")
	require.Contains(t, *doneB.Error, "budget")
	require.Equal(t, start+2, b.nonce(t), "the refused send sent nothing")

	runC := run("c", 6)
	apC := b.parked(t, runC)
	_, err = b.decide(t, apC.ID, store.ApprovalDecision{Approve: false, By: "carol"})
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, b.waitRun(t, runC).Status)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := e.RetryRunTx(ctx, tx, runC)
		return err
	}))
	var again *store.Approval
	require.Eventually(t, func() bool {
		aps, err := store.ListApprovals(ctx, pool, store.ApprovalFilter{RunID: runC, Status: store.ApprovalPending})
		require.NoError(t, err)
		if len(aps) == 1 {
			again = aps[0]
		}
		return again != nil
	}, 30*time.Second, 20*time.Millisecond, "the retried run asks again")
	require.Equal(t, 2, again.Attempt)
	require.NotEqual(t, apC.ID, again.ID)
	require.Equal(t, start+2, b.nonce(t))
}

// TestApprovalInForeach: each item of a foreach gets its own gate, and each
// approved item sends once.
func TestApprovalInForeach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	_, from := anviltest.Key(t, 1)
	project := chainProject(t, fmt.Sprintf(`
name: fan
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "0x%s" }
workflows:
  - name: fan
    trigger: { manual: {} }
    steps:
      - id: each
        foreach: "${{ trigger.input.amounts }}"
        concurrency: 2
        steps:
          - id: pay
            send: { wallet: ops, to: "0x000000000000000000000000000000000000dEaD", value: "${{ item }}", approval: {} }
    finally:
      - id: last
        send: { wallet: ops, to: "0x000000000000000000000000000000000000dEaD", value: "1", approval: {} }
`, node.URL, anviltest.DevKeys[1]), os.LookupEnv)
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond})
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	b := &gateBundle{testBundle: &testBundle{pool: pool, engine: e, project: project}, node: node, from: from}
	start := b.nonce(t)
	id := b.manual(t, "fan", "x", map[string]any{"amounts": []any{7, 8}})
	pending := func(n int) []*store.Approval {
		var aps []*store.Approval
		require.Eventually(t, func() bool {
			var err error
			aps, err = store.ListApprovals(ctx, pool, store.ApprovalFilter{RunID: id, Status: store.ApprovalPending})
			require.NoError(t, err)
			return len(aps) == n
		}, 30*time.Second, 20*time.Millisecond)
		return aps
	}
	items := pending(2)
	keys := []string{items[0].StepKey, items[1].StepKey}
	require.ElementsMatch(t, []string{"pay[0]", "pay[1]"}, keys)
	for _, ap := range items {
		_, err := b.decide(t, ap.ID, store.ApprovalDecision{Approve: true, By: "alice"})
		require.NoError(t, err)
	}
	last := pending(1)
	require.Equal(t, "last", last[0].StepKey, "finally: gates too")
	_, err = b.decide(t, last[0].ID, store.ApprovalDecision{Approve: true, By: "alice"})
	require.NoError(t, err)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	require.Equal(t, start+3, b.nonce(t))
}

// TestApprovalGateWithNodeDown: a gate opens even when the node does not
// answer its simulation (the summary says so); once the node is back, the
// approved send is simulated again and goes out.
func TestApprovalGateWithNodeDown(t *testing.T) {
	t.Parallel()
	b := startGates(t, "1h", "reject")
	b.node.Stop()
	id := b.pay(t, "down", 10, "", "")
	ap := b.parked(t, id)
	sum, err := jobs.DecodeApprovalSummary(ap.Summary)
	require.NoError(t, err)
	require.Nil(t, sum.Simulation)
	require.Contains(t, sum.SimulationError, "simulation unavailable")
	b.node.Restart() // a fresh chain: the wallet's nonce starts at 0
	_, err = b.decide(t, ap.ID, store.ApprovalDecision{Approve: true, By: "alice"})
	require.NoError(t, err)
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	require.Equal(t, uint64(1), b.nonce(t))
}
