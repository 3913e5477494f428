package jobs_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// chainProject writes a project (with the Emitter's ABI as ./Vault.json)
// and loads it; lookupEnv resolves ${VAR}s (nil: the environment).
func chainProject(t testing.TB, projectYAML string, lookupEnv func(string) (string, bool)) *workflow.Project {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(projectYAML), 0o644))
	project, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{LookupEnv: lookupEnv})
	require.NoError(t, err)
	return project
}

// chainBundle deploys the project on a fresh database and runs an engine
// and the chain service claiming through it.
func chainBundle(t *testing.T, projectYAML string) (*pgxpool.Pool, *jobs.Engine) {
	t.Helper()
	return chainBundleWith(t, projectYAML, nil)
}

// chainBundleWith is chainBundle with a hook that adjusts the chain
// service's configuration.
func chainBundleWith(t *testing.T, projectYAML string, adjust func(*chain.Config)) (*pgxpool.Pool, *jobs.Engine) {
	t.Helper()
	ctx := context.Background()
	pool, e := deployed(t, chainProject(t, projectYAML, nil))
	cfg := e.ChainConfig()
	if adjust != nil {
		adjust(&cfg)
	}
	svc, err := chain.NewService(ctx, pool, e, cfg, nil)
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(sctx) }()
	t.Cleanup(func() { cancel(); <-done; svc.Close() })
	return pool, e
}

// TestEventTriggerEndToEnd: a Deposit log on a real anvil becomes exactly
// one confirmed-phase run (where: filters before claiming), whose http_call
// carries the exact uint256 amount.
func TestEventTriggerEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)

	pool, _ := chainBundle(t, fmt.Sprintf(`
name: e2e
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 2, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: big-deposits
    trigger:
      event: { contract: Vault, event: Deposit, where: "${{ event.amount >= 10 }}", run_on: confirmed }
    steps:
      - id: tell
        http_call: { method: POST, url: "%s/deposit", body: "${{ event.amount }}" }
`, node.URL, em.Address.Hex(), recv.URL))

	// 2^255 + 1: far beyond float64's exact range.
	huge := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(1))
	em.Deposit(5) // filtered out by where:
	em.Deposit(50)
	em.Transact("deposit", huge)
	node.Mine(3) // confirmations

	require.Eventually(t, func() bool { return len(recv.got("/deposit")) == 2 }, 30*time.Second, 50*time.Millisecond)
	bodies := map[string]bool{}
	for _, r := range recv.got("/deposit") {
		bodies[r.Body] = true
	}
	// A uint256 of the ABI is a decimal string in a request body, small
	// or not: one JSON type whatever its size.
	require.True(t, bodies[`"50"`], "%v", bodies)
	require.True(t, bodies[`"`+huge.String()+`"`], "uint256 stays exact end to end: %v", bodies)
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Workflow: "big-deposits"})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	for _, r := range runs {
		require.Equal(t, trigger.Event, r.TriggerKind)
		require.Regexp(t, `^31337:0x[0-9a-f]{64}:tx\d+$`, r.TriggerKey)
	}
	time.Sleep(500 * time.Millisecond)
	require.Len(t, recv.got("/deposit"), 2, "no log claimed twice")
}

// TestReadAndBlockTriggersEndToEnd: a read trigger (a view call every 2
// blocks, filtered by when:) and a block trigger (every 3 blocks) start runs
// through the engine, with the result and block number in the payload.
func TestReadAndBlockTriggersEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	em.Deposit(42) // totalAssets() = 42
	recv := newReceiver(t)
	pool, _ := chainBundle(t, fmt.Sprintf(`
name: reads
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q }
workflows:
  - name: assets
    trigger: { read: { contract: Vault, function: totalAssets, every: 2 blocks, when: "${{ result >= 40 }}" } }
    steps:
      - { id: tell, http_call: { method: POST, url: "%[3]s/assets", body: "${{ trigger.result }}" } }
  - name: blocks
    trigger: { block: { network: local, every: 3 } }
    steps:
      - { id: tell, http_call: { method: POST, url: "%[3]s/block", body: "${{ trigger.block }}" } }
`, node.URL, em.Address.Hex(), recv.URL))

	// Block and read triggers start at the head they first see: keep
	// mining until both have fired twice.
	require.Eventually(t, func() bool {
		node.Mine(1)
		return len(recv.got("/assets")) >= 2 && len(recv.got("/block")) >= 2
	}, 30*time.Second, 100*time.Millisecond)
	for _, r := range recv.got("/assets") {
		require.Equal(t, `"42"`, r.Body, "a read result the ABI types uint256 is a decimal string")
	}
	for _, r := range recv.got("/block") {
		n, err := strconv.Atoi(r.Body)
		require.NoError(t, err)
		require.Zero(t, n%3, "block %d is a multiple of every: 3", n)
	}
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Workflow: "assets"})
	require.NoError(t, err)
	for _, r := range runs {
		require.Equal(t, trigger.Read, r.TriggerKind)
		require.Regexp(t, `^\d+$`, r.TriggerKey, "every-N-blocks reads are keyed by block number")
	}
}
