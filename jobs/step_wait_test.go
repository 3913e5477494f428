package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// sagaProject: a Deposit starts a run that waits for the Claimed event of
// the same amount, then reports it. The first %s is extra wait_for fields.
func sagaProject(node *anviltest.Node, em *anviltest.Emitter, recv *receiver, runOn, waitExtra string) string {
	return fmt.Sprintf(`
name: saga
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 2, block_poll_interval: 50ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: saga
    trigger:
      event: { contract: Vault, event: Deposit, run_on: %s }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.event.amount }}" }
          %s
      - id: tell
        http_call: { method: POST, url: "%s/claimed", body: { amount: "${{ steps.claimed.output.amount }}", tx: "${{ steps.claimed.output.tx_hash }}", block: "${{ steps.claimed.output.block }}" } }
      - id: done
        noop: {}
      - id: remind
        if: "${{ steps.claimed.output.timed_out == true }}"
        http_call: { method: POST, url: "%[5]s/remind", body: "${{ steps.claimed.output }}" }
`, node.URL, em.Address.Hex(), runOn, waitExtra, recv.URL)
}

func onlyRun(t *testing.T, pool *pgxpool.Pool, wf string) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		runs, err := store.ListRuns(context.Background(), pool, store.RunFilter{Workflow: wf})
		require.NoError(t, err)
		if len(runs) != 1 {
			return false
		}
		run = runs[0]
		return true
	}, 30*time.Second, 20*time.Millisecond, "no run of %s", wf)
	return run
}

func runWaits(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) []*store.Wait {
	t.Helper()
	ws, err := store.RunWaits(context.Background(), pool, id)
	require.NoError(t, err)
	return ws
}

func eventuallyWait(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, status store.WaitStatus) *store.Wait {
	t.Helper()
	var w *store.Wait
	require.Eventually(t, func() bool {
		ws := runWaits(t, pool, id)
		if len(ws) == 0 {
			return false
		}
		w = ws[len(ws)-1]
		return w.Status == status
	}, 30*time.Second, 20*time.Millisecond, "wait of run %s never %s", id, status)
	return w
}

// TestWaitForSettlesAtDepth: the run parks with its conditions persisted;
// a Claimed of another amount does not match; the matching one arms the
// wait at the head and settles it only at its confirmations, with the
// decoded event as the step's output.
func TestWaitForSettlesAtDepth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, sagaProject(node, em, recv, "head", "confirmations: 3\n          timeout: 1h\n          on_timeout: { goto: remind }"))

	em.Deposit(7)
	run := onlyRun(t, pool, "saga")
	w := eventuallyWait(t, pool, run.ID, store.WaitWaiting)
	require.Equal(t, "amount=n:7", w.MatchKey, "the where's equality is the wait's index key")
	require.Equal(t, 3, w.Confirmations)
	require.NotNil(t, w.Deadline)
	require.WithinDuration(t, time.Now().Add(time.Hour), *w.Deadline, time.Minute)
	require.Equal(t, "goto:remind", w.OnTimeout)
	got, err := store.GetRun(ctx, pool, run.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingEvent, got.Status)

	em.Transact("claim", big.NewInt(8)) // another amount
	rc := em.Transact("claim", big.NewInt(7))
	w = eventuallyWait(t, pool, run.ID, store.WaitArmed)
	require.Equal(t, int64(rc.BlockNumber.Uint64()), *w.CandBlock)
	require.Equal(t, store.StepWaiting, (&testBundle{pool: pool}).steps(t, run.ID)["claimed"].Status,
		"a head delivery only arms the wait")
	node.Mine(1)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, store.WaitArmed, runWaits(t, pool, run.ID)[0].Status, "not yet 3 deep")
	node.Mine(2)

	b := &testBundle{pool: pool, recv: recv}
	done := b.waitRun(t, run.ID)
	require.Equal(t, store.RunCompleted, done.Status)
	require.Equal(t, store.WaitMatched, runWaits(t, pool, run.ID)[0].Status)
	bodies := recv.got("/claimed")
	require.Len(t, bodies, 1)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(bodies[0].Body), &body))
	require.EqualValues(t, 7, body["amount"])
	require.Equal(t, rc.TxHash.Hex(), body["tx"])
	require.EqualValues(t, rc.BlockNumber.Int64(), body["block"])
	require.Empty(t, recv.got("/remind"))
}

// TestWaitForLookback: a Claimed mined after the Deposit but before the run
// parks (the trigger waits for 2 confirmations) still matches: the wait
// looks back from the trigger's block.
func TestWaitForLookback(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, sagaProject(node, em, recv, "confirmed", "confirmations: 1"))
	// Let the feed start at the current head before anything happens.
	time.Sleep(time.Second)
	em.Deposit(5)
	rc := em.Transact("claim", big.NewInt(5))
	require.Never(t, func() bool {
		runs, _ := store.ListRuns(context.Background(), pool, store.RunFilter{Workflow: "saga"})
		return len(runs) > 0
	}, 500*time.Millisecond, 50*time.Millisecond, "the trigger waits for its confirmations")
	node.Mine(2)
	run := onlyRun(t, pool, "saga")
	b := &testBundle{pool: pool, recv: recv}
	require.Equal(t, store.RunCompleted, b.waitRun(t, run.ID).Status)
	bodies := recv.got("/claimed")
	require.Len(t, bodies, 1)
	require.Contains(t, bodies[0].Body, rc.TxHash.Hex())
}

// TestWaitForTimeoutGoto: with no match, the deadline completes the step
// with timed_out and jumps to the on_timeout target; the steps between
// never run. A later matching event changes nothing.
func TestWaitForTimeoutGoto(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, sagaProject(node, em, recv, "head", "confirmations: 0\n          timeout: 1s\n          on_timeout: { goto: remind }"))
	em.Deposit(9)
	run := onlyRun(t, pool, "saga")
	b := &testBundle{pool: pool, recv: recv}
	require.Equal(t, store.RunCompleted, b.waitRun(t, run.ID).Status)
	require.Len(t, recv.got("/remind"), 1)
	require.JSONEq(t, `{"timed_out": true, "goto": "remind"}`, recv.got("/remind")[0].Body)
	require.Empty(t, recv.got("/claimed"))
	steps := b.steps(t, run.ID)
	require.Nil(t, steps["tell"])
	require.Equal(t, store.WaitTimedOut, runWaits(t, pool, run.ID)[0].Status)
	em.Transact("claim", big.NewInt(9))
	node.Mine(2)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, store.WaitTimedOut, runWaits(t, pool, run.ID)[0].Status)
	require.Empty(t, recv.got("/claimed"))
}

// TestWaitForTimeoutFails: on_timeout fail (the default) fails the run
// with a message naming the event.
func TestWaitForTimeoutFails(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, e := chainBundle(t, sagaProject(node, em, recv, "head", "timeout: 1s"))
	em.Deposit(3)
	run := onlyRun(t, pool, "saga")
	b := &testBundle{pool: pool, recv: recv}
	got := b.waitRun(t, run.ID)
	require.Equal(t, store.RunFailed, got.Status)
	require.Contains(t, *got.Error, "wait_for timed out after 1s: no Vault.Claimed event matched")

	// The Claimed comes late; `runs retry` parks the step again at its
	// next attempt, whose look-back from the trigger's block finds it.
	em.Transact("claim", big.NewInt(3))
	node.Mine(2)
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := e.RetryRunTx(context.Background(), tx, run.ID)
		return err
	}))
	w := eventuallyWait(t, pool, run.ID, store.WaitMatched)
	require.Equal(t, 2, w.Attempt)
	got = b.waitRun(t, run.ID)
	require.Equal(t, store.RunCompleted, got.Status, "%v", got.Error)
	require.Len(t, recv.got("/claimed"), 1)
}

// TestWaitForReorgRearms: a matching log removed by a reorg before it is
// deep enough returns the wait to waiting; it settles later on a new
// matching log, with that log's transaction.
func TestWaitForReorgRearms(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, sagaProject(node, em, recv, "head", "confirmations: 4"))
	em.Deposit(11)
	// Keep the deposit out of the reorg below: an orphaned trigger log
	// stops its run (on_reorg), which is not what this test is about.
	node.Mine(1)
	run := onlyRun(t, pool, "saga")
	eventuallyWait(t, pool, run.ID, store.WaitWaiting)
	first := em.Transact("claim", big.NewInt(11))
	eventuallyWait(t, pool, run.ID, store.WaitArmed)
	node.Reorg(2) // the claim's block and the one below it are replaced by empty ones
	eventuallyWait(t, pool, run.ID, store.WaitWaiting)
	node.Mine(6)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, store.WaitWaiting, runWaits(t, pool, run.ID)[0].Status, "the removed log never settles the wait")
	second := em.Transact("claim", big.NewInt(11))
	node.Mine(4)
	b := &testBundle{pool: pool, recv: recv}
	require.Equal(t, store.RunCompleted, b.waitRun(t, run.ID).Status)
	bodies := recv.got("/claimed")
	require.Len(t, bodies, 1)
	require.Contains(t, bodies[0].Body, second.TxHash.Hex())
	require.NotContains(t, bodies[0].Body, first.TxHash.Hex())
}

// TestWaitForCancel: cancelling a run parked on a wait cancels the wait;
// a matching event afterwards resumes nothing.
func TestWaitForCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, sagaProject(node, em, recv, "head", "confirmations: 0"))
	em.Deposit(4)
	run := onlyRun(t, pool, "saga")
	eventuallyWait(t, pool, run.ID, store.WaitWaiting)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := jobs.CancelRun(ctx, tx, run.ID)
		return err
	}))
	require.Equal(t, store.WaitCancelled, runWaits(t, pool, run.ID)[0].Status)
	em.Transact("claim", big.NewInt(4))
	node.Mine(2)
	time.Sleep(700 * time.Millisecond)
	got, err := store.GetRun(ctx, pool, run.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, got.Status)
	require.Empty(t, recv.got("/claimed"))
}

// TestWaitForForeachAndFinally: waits park per foreach item (each keyed on
// its item) and inside finally:, and each settles on its own event.
func TestWaitForForeachAndFinally(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, fmt.Sprintf(`
name: fan
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 50ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q }
workflows:
  - name: fan
    trigger: { event: { contract: Vault, event: Deposit, run_on: head } }
    steps:
      - id: each
        foreach: "${{ [100, 200] }}"
        concurrency: 2
        steps:
          - id: got
            wait_for: { event: { contract: Vault, event: Claimed, where: "${{ event.amount == item }}" } }
    finally:
      - id: last
        wait_for: { event: { contract: Vault, event: Claimed, where: "${{ event.amount == 300 }}" } }
      - id: tell
        http_call: { method: POST, url: "%s/fan", body: "${{ steps.each.output }}" }
`, node.URL, em.Address.Hex(), recv.URL))
	em.Deposit(1)
	run := onlyRun(t, pool, "fan")
	require.Eventually(t, func() bool { return len(runWaits(t, pool, run.ID)) == 2 }, 30*time.Second, 20*time.Millisecond)
	em.Transact("claim", big.NewInt(200))
	em.Transact("claim", big.NewInt(300)) // before the finally wait parks: its lookback finds it
	em.Transact("claim", big.NewInt(100))
	require.Eventually(t, func() bool { return len(runWaits(t, pool, run.ID)) == 3 }, 30*time.Second, 20*time.Millisecond)
	em.Transact("claim", big.NewInt(300))
	b := &testBundle{pool: pool, recv: recv}
	require.Equal(t, store.RunCompleted, b.waitRun(t, run.ID).Status)
	for _, w := range runWaits(t, pool, run.ID) {
		require.Equal(t, store.WaitMatched, w.Status, w.StepKey)
	}
	bodies := recv.got("/fan")
	require.Len(t, bodies, 1)
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(bodies[0].Body), &items))
	require.Len(t, items, 2)
	require.EqualValues(t, 100, items[0]["amount"])
	require.EqualValues(t, 200, items[1]["amount"])
}

// TestWaitForTimeoutRacingMatch: matches delivered right at the deadline
// of 30 waits race their timeout jobs; each wait settles exactly once, and
// the run went the way its wait's status says (matched: the next step;
// timed_out: the on_timeout target), never both.
func TestWaitForTimeoutRacingMatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := newReceiver(t)
	addr := "0x00000000000000000000000000000000000000aa"
	project := chainProject(t, `
name: race
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 0 }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "`+addr+`" }
workflows:
  - name: race
    trigger: { manual: {} }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.input.n }}" }
          confirmations: 0
          timeout: 3s
          on_timeout: { goto: remind }
      - id: tell
        http_call: { method: POST, url: "`+recv.URL+`/tell" }
      - id: remind
        if: "${{ steps.claimed.output.timed_out == true }}"
        http_call: { method: POST, url: "`+recv.URL+`/remind" }
`, nil)
	pool, e := deployed(t, project)
	b := &testBundle{pool: pool, engine: e, recv: recv}
	const n = 30
	claims := make([]store.Claim, n)
	for i := range claims {
		claims[i] = store.Claim{Workflow: "race", TriggerKey: fmt.Sprint(i), TriggerKind: trigger.Manual,
			Trigger: []byte(fmt.Sprintf(`{"input": {"n": %d}}`, i))}
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := e.ClaimTx(ctx, tx, claims)
		return err
	}))
	ids := make([]uuid.UUID, n)
	var deadline time.Time
	for i := range ids {
		id, _, err := store.RunByKey(ctx, pool, "race", fmt.Sprint(i), nil)
		require.NoError(t, err)
		ids[i] = id
		deadline = *eventuallyWait(t, pool, id, store.WaitWaiting).Deadline
	}
	ev := anviltest.EmitterABI(t).Events["Claimed"]
	feed := store.WaitFeed{ChainID: 31337, Address: addr, Topic: ev.ID.Hex()}
	// The timeout jobs become due at the deadline and run when River's
	// scheduler makes them available: spread the matches across that.
	time.Sleep(time.Until(deadline) - 2250*time.Millisecond)
	for i := 0; i < n; i++ {
		time.Sleep(150 * time.Millisecond)
		log := chain.Decoded{Event: "Claimed", Address: common.HexToAddress(addr), LogIndex: uint(i), TxHash: common.BigToHash(big.NewInt(int64(i + 1))),
			Args: map[string]any{"user": common.HexToAddress(addr), "amount": big.NewInt(int64(i))}}
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return e.MatchTx(ctx, tx, chain.WaitDelivery{Feed: feed, Logs: []chain.Decoded{log}})
		}))
	}
	counts := map[string]int{}
	for _, id := range ids {
		run := b.waitRun(t, id)
		require.Equal(t, store.RunCompleted, run.Status)
		ws := runWaits(t, pool, id)
		require.Len(t, ws, 1)
		counts[string(ws[0].Status)]++
		var tell, remind int
		for _, r := range recv.got("/tell") {
			if r.Header.Get("X-Rflow-Run-Id") == id.String() {
				tell++
			}
		}
		for _, r := range recv.got("/remind") {
			if r.Header.Get("X-Rflow-Run-Id") == id.String() {
				remind++
			}
		}
		switch ws[0].Status {
		case store.WaitMatched:
			require.Equal(t, [2]int{1, 0}, [2]int{tell, remind}, "matched run %s", id)
		case store.WaitTimedOut:
			require.Equal(t, [2]int{0, 1}, [2]int{tell, remind}, "timed-out run %s", id)
		default:
			t.Fatalf("wait of run %s ended %s", id, ws[0].Status)
		}
	}
	t.Logf("outcomes: %v", counts)
	require.Positive(t, counts[string(store.WaitMatched)], "some matches came before the deadline")
	require.Positive(t, counts[string(store.WaitTimedOut)], "some deadlines came before the match")
}

// TestWaitForMatchFollowsItsLog: a wait armed with a Claimed log whose
// transaction a reorg mines again behind another transaction's logs is
// the same match in its new place: the same tx_hash and tx_log_index (read
// from the receipt: the transaction is not its block's first), a new block
// and log_index, and the run settles once on it.
func TestWaitForMatchFollowsItsLog(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	other := anviltest.DeployEmitterWith(t, node, 2)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, sagaProject(node, em, recv, "head", "confirmations: 4"))
	em.Deposit(11)
	node.Mine(1)
	run := onlyRun(t, pool, "saga")
	eventuallyWait(t, pool, run.ID, store.WaitWaiting)
	filler := other.EmitMany(2, 100)
	claim := em.Transact("claim", big.NewInt(11))
	require.Equal(t, uint(0), claim.Logs[0].Index, "first claimed alone in its block")
	eventuallyWait(t, pool, run.ID, store.WaitArmed)

	node.ReorgWith(2, anviltest.ReorgTx{Raw: node.RawTx(filler.TxHash)}, anviltest.ReorgTx{Raw: node.RawTx(claim.TxHash)})
	moved, err := node.Client().TransactionReceipt(context.Background(), claim.TxHash)
	require.NoError(t, err)
	require.Equal(t, uint(2), moved.Logs[0].Index, "behind the filler's two logs")
	node.Mine(5)
	b := &testBundle{pool: pool, recv: recv}
	require.Equal(t, store.RunCompleted, b.waitRun(t, run.ID).Status)
	var out struct {
		TxHash     string `json:"tx_hash"`
		Block      int64  `json:"block"`
		LogIndex   uint   `json:"log_index"`
		TxLogIndex uint   `json:"tx_log_index"`
	}
	require.NoError(t, json.Unmarshal(b.steps(t, run.ID)["claimed"].Output, &out))
	require.Equal(t, claim.TxHash.Hex(), out.TxHash)
	require.Equal(t, uint(0), out.TxLogIndex, "its position in its transaction")
	require.Equal(t, moved.BlockNumber.Int64(), out.Block, "where it is now")
	require.Equal(t, uint(2), out.LogIndex)
	require.Len(t, recv.got("/claimed"), 1)
}
