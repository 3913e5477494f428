package jobs_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// TestDeployedChainTriggersIngestWithoutRestart: the chain service runs
// what is deployed, not the process's file. A workflow with an event
// trigger deployed while the service runs starts claiming (from its
// contract's start block); a new generation with another where: applies to
// every range committed after the deploy, even those the old task had
// already read (the generation fence), with no occurrence claimed twice; a
// block trigger deployed later fires, and stops when its workflow is
// redeployed with a manual trigger.
func TestDeployedChainTriggersIngestWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	// A slow reload: the old task surely reads the ranges after a deploy
	// before it is rebuilt, so only the fence keeps it from claiming them.
	pool, e := chainBundleWith(t, fmt.Sprintf(`
name: reload
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: seed
    trigger: { manual: {} }
    steps:
      - { id: noop, http_call: { method: POST, url: "%s/seed" } }
`, node.URL, em.Address.Hex(), recv.URL), func(c *chain.Config) { c.ReloadInterval = 3 * time.Second })

	em.Deposit(15) // before the deploy: a new trigger starts at start_block
	deploy(t, pool, e, "late", fmt.Sprintf(`
name: late
trigger:
  event: { contract: Vault, event: Deposit, where: "${{ event.amount >= 10 }}", run_on: head }
steps:
  - { id: tell, http_call: { method: POST, url: "%s/deposit", body: "${{ event.amount }}" } }
`, recv.URL), 1)
	em.Deposit(5) // filtered out
	em.Deposit(20)
	bodies := func() []string {
		var out []string
		for _, r := range recv.got("/deposit") {
			out = append(out, r.Body)
		}
		sort.Strings(out)
		return out
	}
	require.Eventually(t, func() bool { return len(bodies()) == 2 }, 30*time.Second, 50*time.Millisecond, "got %v", bodies())
	require.Equal(t, []string{`"15"`, `"20"`}, bodies(), "the uint256 amounts, as decimal strings")

	deploy(t, pool, e, "late", fmt.Sprintf(`
name: late
trigger:
  event: { contract: Vault, event: Deposit, where: "${{ event.amount >= 100 }}", run_on: head }
steps:
  - { id: tell, http_call: { method: POST, url: "%s/deposit", body: "${{ event.amount }}" } }
`, recv.URL), 2)
	em.Deposit(50) // passes generation 1's where: only, and is mined before the reload
	em.Deposit(200)
	require.Eventually(t, func() bool { return len(bodies()) >= 3 }, 30*time.Second, 50*time.Millisecond, "got %v", bodies())
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, []string{`"15"`, `"20"`, `"200"`}, bodies(), "generation 2's where: applies to every range after its deploy; nothing claimed twice")
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Workflow: "late"})
	require.NoError(t, err)
	require.Len(t, runs, 3)
	gens := map[int64]int{}
	for _, r := range runs {
		gens[r.Generation]++
	}
	require.Equal(t, map[int64]int{1: 2, 2: 1}, gens)

	// A block trigger deployed later fires; redeployed as manual, it stops.
	deploy(t, pool, e, "blocks", fmt.Sprintf(`
name: blocks
trigger: { block: { network: local, every: 1 } }
steps:
  - { id: tell, http_call: { method: POST, url: "%s/block", body: "${{ trigger.block }}" } }
`, recv.URL), 1)
	require.Eventually(t, func() bool {
		node.Mine(1)
		return len(recv.got("/block")) >= 2
	}, 30*time.Second, 100*time.Millisecond)
	deploy(t, pool, e, "blocks", `
name: blocks
trigger: { manual: {} }
steps:
  - { id: tell, http_call: { method: POST, url: "http://127.0.0.1:9/unused" } }
`, 2)
	blockRuns := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'blocks'`).Scan(&n))
		return n
	}
	time.Sleep(4 * time.Second) // past the reload
	before := blockRuns()
	node.Mine(5)
	time.Sleep(time.Second)
	require.Equal(t, before, blockRuns(), "a trigger no longer deployed claims nothing")
}

// deploy stores a definition the way PUT /v1/workflows does and requires
// the generation it got.
func deploy(t *testing.T, pool *pgxpool.Pool, e *jobs.Engine, name, src string, generation int64) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		d, err := e.DeployTx(context.Background(), tx, name, []byte(src))
		if err == nil && d.Generation != generation {
			err = fmt.Errorf("deployed %s as generation %d, want %d", name, d.Generation, generation)
		}
		return err
	}))
}
