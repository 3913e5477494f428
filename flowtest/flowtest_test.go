package flowtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/flowtest"
	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const project = `
name: flows
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 1 }
wallets:
  - { name: ops, private_key: "${FLOWTEST_UNSET_KEY}" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: quote
        http_call: { method: GET, url: "https://quotes.example/eth", retry: { max_attempts: 3, backoff: fixed, delay: 10ms } }
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ trigger.input.wei }}" }
      - id: refund
        if: "${{ trigger.input.refund }}"
        send:
          wallet: ops
          network: local
          contract: Vault
          function: refund
          args: ["0x000000000000000000000000000000000000dEaD", "${{ steps.quote.output.body.price }}"]
  - name: hook
    trigger: { webhook: { idempotency_key: "${{ body.id }}" } }
    steps:
      - id: tell
        http_call: { method: POST, url: "https://hooks.example/tell", body: { id: "${{ body.id }}", by: "${{ headers['x-who'] }}" } }
  - name: watch
    trigger: { read: { contract: Vault, function: totalAssets, every: 5 blocks, when: "${{ result > 10 }}" } }
    steps:
      - id: note
        http_call: { method: POST, url: "https://notes.example/assets", body: { assets: "${{ trigger.result }}", block: "${{ trigger.block }}" } }
  - name: deposits
    trigger: { event: { contract: Vault, event: Deposit, where: "${{ 100 / event.amount > 1 }}" } }
    steps:
      - id: note
        http_call: { method: POST, url: "https://notes.example/deposit", body: { from: "${{ event.sender }}", amount: "${{ event.amount }}" } }
  - name: saga
    trigger: { manual: {} }
    steps:
      - { id: pause, delay: 10m }
      - id: claimed
        wait_for: { event: { contract: Vault, event: Claimed }, confirmations: 1, timeout: 1h, on_timeout: { goto: remind } }
      - { id: settled, http_call: { method: POST, url: "https://hooks.example/settled" } }
      - id: remind
        if: "${{ steps.claimed.output.timed_out == true }}"
        http_call: { method: POST, url: "https://hooks.example/remind" }
  - name: tick
    trigger: { cron: { schedule: "*/5 * * * *" } }
    steps:
      - id: fail_loudly
        fail: "tick ${{ trigger.tick }}"
`

type bundle struct {
	pool    *pgxpool.Pool
	project *workflow.Project
	dir     string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(project), 0o644))
	p, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{AllowUnsetEnv: true})
	require.NoError(t, err)
	return &bundle{pool: storetest.Pool(t), project: p, dir: dir}
}

func (b *bundle) run(t *testing.T, src string) []flowtest.Result {
	t.Helper()
	f, err := fixture.Parse(filepath.Join(b.dir, "tests", "x.test.yaml"), []byte(src))
	require.NoError(t, err)
	res, err := flowtest.Run(context.Background(), flowtest.Options{Pool: b.pool, Project: b.project, Timeout: 20 * time.Second}, []*fixture.File{f})
	require.NoError(t, err)
	var n int64
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM rflow.workflow_runs) + (SELECT count(*) FROM rflow.workflows)
		      + (SELECT count(*) FROM rflow.step_runs) + (SELECT count(*) FROM relayer.transactions)
		      + (SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'rehearsal%')`).Scan(&n))
	require.Zero(t, n, "rows left behind")
	return res
}

func messages(r flowtest.Result) string {
	var sb strings.Builder
	for _, f := range r.Failures {
		sb.WriteString(f.At + ": " + f.Path + ": " + f.Message + "\n" + f.Diff + "\n")
	}
	return sb.String()
}

// Sends are captured (never reach a relayer or a chain) with their
// decoded calldata; a stub list for one URL answers in sequence, so a retry
// sees the second answer.
func TestSendsAndStubSequences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.run(t, `
workflow: pay
tests:
  - name: pays and refunds the quoted price
    given: { manual: { input: { wei: "1000000000000000000", refund: true } } }
    http:
      - { url: "https://quotes.example/eth", status: 503 }
      - { url: "https://quotes.example/eth", body: { price: 1234 } }
    expect:
      status: completed
      steps: { ran: [quote, pay, refund] }
      outputs: { pay: { status: confirmed, test: true }, quote: { body: { price: 1234 } } }
      requests: [ { method: GET }, { method: GET } ]
      sends:
        - { wallet: ops, to: "0x000000000000000000000000000000000000dead", value: 1000000000000000000 }
        - { function: refund, to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", args: ["0x000000000000000000000000000000000000dEaD", 1234] }
  - name: a wrong send argument fails
    given: { manual: { input: { wei: 5, refund: true } } }
    http: [ { url: "https://quotes.example/eth", body: { price: 7 } } ]
    expect:
      sends: [ { value: 5 }, { args: ["0x000000000000000000000000000000000000dEaD", 8] } ]
  - name: an unstubbed request fails the test
    given: { manual: { input: { wei: 5 } } }
    expect: { status: failed }
`)
	require.Len(t, res, 3)
	require.True(t, res[0].Passed, messages(res[0]))
	require.False(t, res[1].Passed)
	require.Contains(t, messages(res[1]), "sends[1].args[1]: want 8, got 7")
	require.False(t, res[2].Passed)
	require.Contains(t, messages(res[2]), "no stub for GET https://quotes.example/eth")
}

// Webhooks dedupe on their idempotency key as live ones do; cron ticks
// and failed runs are checked; -run style selection picks tests by name.
func TestWebhookCronAndSelection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.run(t, `
tests:
  - name: a repeated webhook is one run
    workflow: hook
    given:
      - webhook: { body: { id: "e1" }, headers: { X-Who: alice } }
      - webhook: { body: { id: "e1" }, headers: { X-Who: bob } }
      - webhook: { body: { id: "e2" }, headers: { X-Who: carol } }
    http: [ { method: POST, url: "https://hooks.example/tell" } ]
    expect:
      runs: [ { status: completed }, { status: completed } ]
      requests:
        - { body: { id: e1, by: alice }, headers: { idempotency-key: "" } }
        - { body: { id: e2, by: carol } }
  - name: a tick fails with its message
    workflow: tick
    given: { cron: "2026-03-01T10:05:00Z" }
    expect: { status: failed, error: "tick 2026-03-01T10:05:00Z", steps: { failed: [fail_loudly] } }
`)
	require.Len(t, res, 2)
	// The idempotency-key header is the run's, never empty: that one
	// expectation fails, and only it.
	require.False(t, res[0].Passed)
	require.Len(t, res[0].Failures, 1, messages(res[0]))
	require.Contains(t, res[0].Failures[0].Path, "requests[0].headers.idempotency-key")
	require.True(t, res[1].Passed, messages(res[1]))
}

// Chain occurrences go through the trigger's condition as on chain: a
// read's when: and an event's where: drop what they refuse (no run) and
// fail visibly what they cannot evaluate; event args are typed by the ABI.
func TestReadsAndEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.run(t, `
tests:
  - name: reads above the threshold run
    workflow: watch
    given: [ { read: { result: 5, block: 10 } }, { read: { result: 11, block: 15 } } ]
    http: [ { url: "https://notes.example/assets" } ]
    expect:
      runs: [ { status: completed } ]
      requests: [ { body: { assets: "11", block: "15" } } ]
  - name: where drops, passes and fails
    workflow: deposits
    given:
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 1000 }
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 7 }
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 0 }
    http: [ { url: "https://notes.example/deposit" } ]
    expect:
      runs:
        - { status: completed, steps: { ran: [note] } }
        - { status: failed, error: "trigger where", steps: { ran: [] } }
      requests: [ { body: { from: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", amount: 7 } } ]
  - name: a bad arg is an error at its place
    workflow: deposits
    given:
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: -1 }
    expect: { runs: 0 }
`)
	require.Len(t, res, 3)
	require.True(t, res[0].Passed, messages(res[0]))
	require.True(t, res[1].Passed, messages(res[1]))
	require.False(t, res[2].Passed)
	require.Len(t, res[2].Failures, 1)
	require.Contains(t, res[2].Failures[0].At, "x.test.yaml:25:72") // the amount key
	require.Contains(t, res[2].Failures[0].Message, "event: amount (uint256)")
}

// A test runs on a clock of its own: a 10-minute delay and a 1-hour
// wait_for timeout take no wall time when the test says nothing of time,
// and a test that says advance: moves its clock exactly that far (59m: the
// wait still waits; 1h: it times out).
func TestVirtualClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := time.Now()
	res := b.run(t, `
workflow: saga
tests:
  - name: the delay and the timeout are skipped
    given: { manual: {} }
    http: [ { url: "https://hooks.example/remind" } ]
    expect:
      status: completed
      steps: { ran: [pause, claimed, "remind@1"] }
      outputs: { claimed: { timed_out: true } }
      requests: [ { url: "https://hooks.example/remind" } ]
  - name: nine minutes in, the delay still waits
    given: [ { manual: {} }, { advance: 9m } ]
    expect: { status: waiting_delay, steps: { ran: [] } }
  - name: the delay and 59 minutes of the wait
    given: [ { manual: {} }, { advance: 10m }, { advance: 59m } ]
    expect: { status: waiting_event, steps: { ran: [pause] }, requests: [] }
  - name: the delay and the whole hour of the wait
    given: [ { manual: {} }, { advance: 10m }, { advance: 1h } ]
    http: [ { url: "https://hooks.example/remind" } ]
    expect:
      status: completed
      steps: { ran: [pause, claimed, "remind@1"] }
      requests: [ { url: "https://hooks.example/remind" } ]
`)
	require.Len(t, res, 4)
	for _, r := range res {
		require.True(t, r.Passed, "%s:\n%s", r.Name, messages(r))
		t.Logf("%s: %s", r.Name, r.Elapsed)
		require.Less(t, r.Elapsed, 5*time.Second, r.Name)
	}
	require.Less(t, time.Since(started), 20*time.Second)
}

// TestReadResultByPosition: a fixture gives a view with several outputs its
// result by name or, as ethers prints a Result, as a list by position;
// expressions read it either way (result.reserve0, result[1]).
func TestReadResultByPosition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw, err := os.ReadFile(anviltest.ContractPath(t, "Reserves.abi.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Pair.json"), raw, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(`
name: pairs
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1" }
contracts:
  - { name: Pair, abi: ./Pair.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: reserves
    trigger: { read: { contract: Pair, function: getReserves, every: 1 block, when: "${{ result[0] > 0 }}" } }
    steps:
      - id: note
        http_call: { method: POST, url: "https://notes.example/r", body: { r0: "${{ result.reserve0 }}", r1: "${{ result[1] }}" } }
`), 0o644))
	p, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{})
	require.NoError(t, err)
	b := &bundle{pool: storetest.Pool(t), project: p, dir: dir}
	res := b.run(t, `
tests:
  - name: by name and by position
    workflow: reserves
    given:
      - read: { result: { reserve0: 0, reserve1: 9, blockTimestampLast: 1 }, block: 1 }
      - read: { result: { reserve0: 100, reserve1: 200, blockTimestampLast: 1 }, block: 2 }
      - read: { result: [300, 400, 1], block: 3 }
    http: [ { url: "https://notes.example/r" } ]
    expect:
      runs: [ { status: completed }, { status: completed } ]
      requests: [ { body: { r0: "100", r1: "200" } }, { body: { r0: "300", r1: "400" } } ]
`)
	require.Len(t, res, 1)
	require.True(t, res[0].Passed, messages(res[0]))
}
