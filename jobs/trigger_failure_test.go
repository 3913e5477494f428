package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const failingWhereProject = `
name: conditions
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: ratio
    trigger:
      event: { contract: Vault, event: Deposit, where: "${{ 10 / (event.amount - 7) >= 0 }}" }
    steps:
      - id: tell
        http_call: { method: POST, url: "%s/ratio", body: "${{ event.amount }}" }
`

func ratioDefinition(where, url string) []byte {
	return []byte(fmt.Sprintf(`
name: ratio
trigger:
  event: { contract: Vault, event: Deposit, where: %q }
steps:
  - id: tell
    http_call: { method: POST, url: "%s/ratio", body: "${{ event.amount }}" }
`, where, url))
}

func runsOf(t *testing.T, pool *pgxpool.Pool, wf string) []*store.Run {
	t.Helper()
	runs, err := store.ListRuns(context.Background(), pool, store.RunFilter{Workflow: wf})
	require.NoError(t, err)
	return runs
}

func retry(t *testing.T, pool *pgxpool.Pool, e *jobs.Engine, id uuid.UUID) *store.Run {
	t.Helper()
	var run *store.Run
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		run, err = e.RetryRunTx(context.Background(), tx, id)
		return err
	}))
	return run
}

func deployDef(t *testing.T, pool *pgxpool.Pool, e *jobs.Engine, name string, src []byte) int64 {
	t.Helper()
	var d store.Deployed
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		d, err = e.DeployTx(context.Background(), tx, name, src)
		return err
	}))
	return d.Generation
}

func waitStatus(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, status store.RunStatus) *store.Run {
	t.Helper()
	var run *store.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = store.GetRun(context.Background(), pool, id, false)
		require.NoError(t, err)
		return run.Status == status
	}, 30*time.Second, 20*time.Millisecond, "run %s never reached %s", id, status)
	return run
}

func stepRows(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) map[string]*store.StepRun {
	t.Helper()
	steps, err := store.RunSteps(context.Background(), pool, id)
	require.NoError(t, err)
	out := map[string]*store.StepRun{}
	for _, s := range steps {
		out[s.Key] = s
	}
	return out
}

// A where: that fails at run time (a division by zero) drops nothing: the
// log becomes a run that fails at once at the trigger step, with the
// expression and its position; `runs retry` evaluates it again under the
// current generation: an error fails it again, true runs its steps, false
// completes it with the trigger skipped.
func TestFailingWhereIsAFailedRunAndRetryReevaluates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, e := chainBundle(t, fmt.Sprintf(failingWhereProject, node.URL, em.Address.Hex(), recv.URL))

	em.Deposit(8) // 10/1 >= 0: a run
	em.Deposit(1) // 10/-6 < 0: filtered out
	a := em.Deposit(7)
	b := em.Deposit(7) // division by zero, twice
	node.Mine(2)

	require.Eventually(t, func() bool { return len(runsOf(t, pool, "ratio")) == 3 }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return len(recv.got("/ratio")) == 1 }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	require.Len(t, runsOf(t, pool, "ratio"), 3, "the filtered log has no run")
	failed, err := store.ListRuns(ctx, pool, store.RunFilter{Workflow: "ratio", Status: store.RunFailed})
	require.NoError(t, err)
	require.Len(t, failed, 2, "both logs whose where: failed are failed runs")
	byTx := map[string]*store.Run{}
	for _, r := range failed {
		require.Equal(t, "trigger", *r.FailedStep)
		// The position is the deployed spec's: file:line:col when the
		// spec keeps it, else "spec of <workflow>".
		require.Regexp(t, `^trigger where: (.*rflow\.yaml:\d+:\d+|spec of ratio): evaluate \$\{\{ 10 / \(event\.amount - 7\) >= 0 \}\}: .*divi`, *r.Error)
		steps := stepRows(t, pool, r.ID)
		require.Len(t, steps, 1)
		require.Equal(t, store.StepFailed, steps["trigger"].Status)
		require.Equal(t, *r.Error, *steps["trigger"].Error)
		byTx[r.TriggerKey] = r
	}
	runA := byTx[chain.EventKey(31337, a.TxHash, 0, chain.PhaseConfirmed, false)]
	runB := byTx[chain.EventKey(31337, b.TxHash, 0, chain.PhaseConfirmed, false)]
	require.NotNil(t, runA)
	require.NotNil(t, runB)

	// Retried under the same definition: it fails again, at attempt 2.
	r := retry(t, pool, e, runA.ID)
	require.Equal(t, store.RunFailed, r.Status)
	require.Equal(t, "trigger", *r.FailedStep)
	require.Contains(t, *r.Error, "divi")
	require.Equal(t, 2, stepRows(t, pool, runA.ID)["trigger"].Attempt)

	// Fixed in generation 2: A runs its steps under it.
	gen2 := deployDef(t, pool, e, "ratio", ratioDefinition("${{ event.amount == 7 || 10 / (event.amount - 7) >= 0 }}", recv.URL))
	require.Equal(t, int64(2), gen2)
	retry(t, pool, e, runA.ID)
	r = waitStatus(t, pool, runA.ID, store.RunCompleted)
	require.Equal(t, gen2, r.Generation)
	steps := stepRows(t, pool, runA.ID)
	require.Equal(t, store.StepCompleted, steps["trigger"].Status)
	require.Equal(t, store.StepCompleted, steps["tell"].Status)
	require.Eventually(t, func() bool { return len(recv.got("/ratio")) == 2 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, `"7"`, recv.got("/ratio")[1].Body)

	// Generation 3 excludes 7: B completes without running anything.
	deployDef(t, pool, e, "ratio", ratioDefinition("${{ event.amount > 7 }}", recv.URL))
	r = retry(t, pool, e, runB.ID)
	require.Equal(t, store.RunCompleted, r.Status)
	steps = stepRows(t, pool, runB.ID)
	require.Len(t, steps, 1)
	require.Equal(t, store.StepSkipped, steps["trigger"].Status)
	require.Contains(t, string(steps["trigger"].Output), "condition is false under generation 3")
	time.Sleep(300 * time.Millisecond)
	require.Len(t, recv.got("/ratio"), 2, "the skipped run sent nothing")
}

// A log the project's ABI cannot decode (it declares amount indexed; the
// contract does not) is a run that fails at once; after the ABI is fixed
// (a restart with the corrected project), `runs retry` decodes it and the
// run takes its steps with the decoded event.
func TestUndecodableLogIsAFailedRunAndRetryDecodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	yaml := fmt.Sprintf(`
name: decoding
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: deposits
    trigger:
      event: { contract: Vault, event: Deposit }
    steps:
      - id: tell
        http_call: { method: POST, url: "%s/deposit", body: "${{ event.amount }}" }
`, node.URL, em.Address.Hex(), recv.URL)

	// The broken ABI: Deposit's amount marked indexed (same signature, so
	// the same topic, but one topic too many to decode).
	var entries []map[string]any
	require.NoError(t, json.Unmarshal(anviltest.EmitterABIJSON(t), &entries))
	for _, en := range entries {
		if en["name"] == "Deposit" && en["type"] == "event" {
			for _, in := range en["inputs"].([]any) {
				in.(map[string]any)["indexed"] = true
			}
		}
	}
	broken, err := json.Marshal(entries)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), broken, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(yaml), 0o644))
	project, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{})
	require.NoError(t, err)
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngine(t, pool, url, project)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	svc, err := chain.NewService(ctx, pool, e, e.ChainConfig(), nil)
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(sctx) }()
	t.Cleanup(func() { cancel(); <-done; svc.Close() })

	em.Deposit(42)
	node.Mine(2)
	require.Eventually(t, func() bool { return len(runsOf(t, pool, "deposits")) == 1 }, 30*time.Second, 50*time.Millisecond)
	run := waitStatus(t, pool, runsOf(t, pool, "deposits")[0].ID, store.RunFailed)
	require.Equal(t, "trigger", *run.FailedStep)
	require.Contains(t, *run.Error, "trigger: the log cannot be decoded as event Deposit(address,uint256)")
	require.Empty(t, recv.got("/deposit"))

	// The corrected project: the same workflow, the real ABI.
	fixed := chainProject(t, yaml, nil)
	e2 := startEngine(t, pool, url, fixed)
	r := retry(t, pool, e2, run.ID)
	require.NotEqual(t, store.RunFailed, r.Status, "error: %v", r.Error)
	waitStatus(t, pool, run.ID, store.RunCompleted)
	require.Eventually(t, func() bool { return len(recv.got("/deposit")) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, `"42"`, recv.got("/deposit")[0].Body)
	r, err = store.GetRun(ctx, pool, run.ID, false)
	require.NoError(t, err)
	require.Contains(t, string(r.Trigger), `"amount": 42`, "the run keeps the decoded event")
}

// A read trigger's when: that fails at run time (a bad index) is a failed
// run per read, like a failing where:; a retry under a fixed generation
// runs the steps with the read's result.
func TestFailingWhenIsAFailedRun(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	em.Deposit(42) // totalAssets() = 42
	recv := newReceiver(t)
	pool, e := chainBundle(t, fmt.Sprintf(`
name: reads
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q }
workflows:
  - name: assets
    trigger: { read: { contract: Vault, function: totalAssets, every: 2 blocks, when: "${{ [1, 2][result] == 1 }}" } }
    steps:
      - { id: tell, http_call: { method: POST, url: "%s/assets", body: "${{ trigger.result }}" } }
`, node.URL, em.Address.Hex(), recv.URL))

	var failed []*store.Run
	require.Eventually(t, func() bool {
		node.Mine(1)
		var err error
		failed, err = store.ListRuns(context.Background(), pool, store.RunFilter{Workflow: "assets", Status: store.RunFailed})
		require.NoError(t, err)
		return len(failed) >= 2
	}, 30*time.Second, 100*time.Millisecond, "no failed runs for the failing when:")
	for _, r := range failed {
		require.Equal(t, "trigger", *r.FailedStep)
		require.Regexp(t, `^trigger when: (.*rflow\.yaml:\d+:\d+|spec of assets): evaluate \$\{\{ \[1, 2\]\[result\] == 1 \}\}: `, *r.Error)
	}
	require.Empty(t, recv.got("/assets"))

	var d store.Deployed
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		d, err = e.DeployTx(context.Background(), tx, "assets", []byte(fmt.Sprintf(`
name: assets
trigger: { read: { contract: Vault, function: totalAssets, every: 2 blocks, when: "${{ result == 42 }}" } }
steps:
  - { id: tell, http_call: { method: POST, url: "%s/assets", body: "${{ trigger.result }}" } }
`, recv.URL)))
		return err
	}))
	retry(t, pool, e, failed[0].ID)
	r := waitStatus(t, pool, failed[0].ID, store.RunCompleted)
	require.Equal(t, d.Generation, r.Generation)
	require.Eventually(t, func() bool {
		for _, q := range recv.got("/assets") {
			if q.Body == `"42"` {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
}
