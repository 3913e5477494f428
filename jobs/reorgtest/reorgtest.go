// Package reorgtest drives an engine through a reorg without a node, for
// tests: it claims a run the way the chain service does and orphans its
// block the way the chain service applies a reorg.
package reorgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// ClaimAtFork claims one Deposit run of workflow credit on chain 31337 from
// block fork (hash 0xaa), as the chain service does, and returns its id.
func ClaimAtFork(t testing.TB, pool *pgxpool.Pool, e *jobs.Engine, fork int64) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var runID uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		key := "31337:0x" + fmt.Sprintf("%064x", 1) + ":tx0"
		trigger := fmt.Sprintf(`{"event": {"amount": 3}, "block": %d, "phase": "head"}`, fork)
		if _, err := e.ClaimTx(ctx, tx, []store.Claim{{Workflow: "credit", TriggerKey: key, TriggerKind: "event",
			Trigger: []byte(trigger), ChainID: 31337, BlockNumber: fork, BlockHash: "0xaa"}}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT id FROM rflow.workflow_runs`).Scan(&runID)
	}))
	return runID
}

// OrphanFork replaces block fork (0xaa) the way the chain service applies a
// reorg (store.ApplyReorg, then the engine's OnReorg hook, in one
// transaction), with a canonical chain running far past it: no trigger
// cursor exists here, so the window decides.
func OrphanFork(t testing.TB, pool *pgxpool.Pool, e *jobs.Engine, fork int64) {
	t.Helper()
	ctx := context.Background()
	var canonical []store.IndexedBlock
	for n := fork; n <= fork+300; n++ {
		canonical = append(canonical, store.IndexedBlock{Number: n, Hash: fmt.Sprintf("0x%064x", n), ParentHash: fmt.Sprintf("0x%064x", n-1)})
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ids, err := store.ApplyReorg(ctx, tx, store.ReorgRecord{ChainID: 31337, ForkBlock: fork, Depth: 1, OldHash: "0xaa",
			NewHash: canonical[0].Hash}, canonical, 1000)
		if err != nil {
			return err
		}
		return e.ChainConfig().OnReorg(ctx, tx, chain.Reorg{ChainID: 31337, ForkBlock: fork, Depth: 1, OrphanedRuns: ids,
			OldHash: "0xaa", NewHash: canonical[0].Hash})
	}))
}

// Response returns the one on_reorg response of run runID, failing the
// test unless there is exactly one.
func Response(t testing.TB, pool *pgxpool.Pool, runID uuid.UUID) *store.Response {
	t.Helper()
	rs, err := store.RunResponses(context.Background(), pool, runID)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	return rs[0]
}

// Project is the YAML of a project named name whose workflow is the one
// ClaimAtFork claims for: credit, on Vault's Deposit events on chain 31337,
// with one step, act, POSTing to url/act, and onReorg as its on_reorg
// steps (the YAML after "on_reorg:", from a newline; %[1]s in it stands for
// url).
func Project(name, url, onReorg string) string {
	return fmt.Sprintf(`
name: %[2]s
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 0 }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: credit
    trigger:
      event: { contract: Vault, event: Deposit, run_on: head }
    steps:
      - id: act
        http_call: { method: POST, url: "%[1]s/act" }
    on_reorg:`+onReorg, url, name)
}
