package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const reorgCrashProject = `
name: reorgcrash
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 2, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: credit
    trigger:
      event: { contract: Vault, event: Deposit, run_on: head }
    steps:
      - id: act
        http_call: { method: POST, url: "%[4]s/act" }
    on_reorg:
      - id: undo
        http_call: { method: POST, url: "%[4]s/undo", body: { fork: "${{ reorg.fork_block }}" } }
      - id: pay1
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}" }
      - id: pay2
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(2) }}" }
`

// TestCrashDuringReorgResponse kills `rflow start` (SIGKILL) in the middle
// of an on_reorg response — after a compensation send is journaled but
// before the relayer has it, and after its transaction was broadcast but
// before its receipt — and restarts it: the response resumes through its
// own journal, the completed undo call is never made again, and each
// compensation send reconciles by its rflow-reorg key: the ops wallet's
// nonce moves by exactly one per send step.
func TestCrashDuringReorgResponse(t *testing.T) {
	t.Parallel()
	// after-journal is hit by act, undo, then pay1: the third hit is the
	// first compensation send.
	for _, point := range []string{jobs.FaultAfterJournal + ":3", "relayer.after-send:1"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			node := anviltest.Start(t, anviltest.Options{})
			em := anviltest.DeployEmitter(t, node)
			_, ops := anviltest.Key(t, 2)
			s := newSink(t)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
			config := filepath.Join(dir, "rflow.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(reorgCrashProject, node.URL, "0x"+anviltest.DevKeys[2],
				em.Address.Hex(), s.URL)), 0o644))
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(ctx, dbURL)
			require.NoError(t, err)
			defer pool.Close()
			count := func(q string, args ...any) int {
				var n int
				if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
					return -1 // not migrated yet
				}
				return n
			}
			before, err := node.Client().NonceAt(ctx, ops, nil)
			require.NoError(t, err)

			p := startRflowWorkers(t, dbURL, config, point, 2)
			orphan := em.Deposit(5)
			require.Eventually(t, func() bool {
				return count(`SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`) == 1
			}, 60*time.Second, 50*time.Millisecond, "the head run acted")
			head := node.BlockNumber()
			require.Eventually(t, func() bool {
				return count(`SELECT count(*) FROM indexer.blocks WHERE number = $1`, head) == 1
			}, 20*time.Second, 50*time.Millisecond, "the window at the tip")
			node.Reorg(1)
			stop := make(chan struct{})
			mined := make(chan struct{})
			go func() { // the fork reaches the network's depth; sends confirm
				defer close(mined)
				for {
					select {
					case <-stop:
						return
					case <-time.After(150 * time.Millisecond):
						node.Call(nil, "anvil_mine", hexutil.Uint64(1))
					}
				}
			}()
			defer func() { close(stop); <-mined }()
			p.waitKilled(t, 60*time.Second)

			var resp uuid.UUID
			require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM rflow.reorg_runs`).Scan(&resp))
			require.Equal(t, 1, count(`SELECT count(*) FROM rflow.reorg_step_runs WHERE run_id = $1 AND step_id = 'undo' AND status = 'completed'`, resp),
				"the undo call was journaled complete before the crash")

			p = startRflow(t, dbURL, config, "")
			require.Eventually(t, func() bool {
				return count(`SELECT count(*) FROM rflow.reorg_runs WHERE id = $1 AND status = 'completed'`, resp) == 1
			}, 90*time.Second, 100*time.Millisecond, "the response completed after the restart")
			p.stop(t)

			undo, act := 0, 0
			for key, n := range s.counts() {
				switch key {
				case resp.String() + ":undo":
					undo = n
				default:
					act += n
				}
			}
			require.Equal(t, 1, undo, "a completed compensation step never reruns")
			require.Equal(t, 1, act)
			after, err := node.Client().NonceAt(ctx, ops, nil)
			require.NoError(t, err)
			require.Equal(t, before+2, after, "exactly one transaction per compensation send step")
			require.Equal(t, 2, count(`SELECT count(*) FROM relayer.transactions WHERE external_id LIKE 'rflow-reorg:%' AND status = 'confirmed'`))
			steps, err := store.JournalSteps(ctx, pool, store.ReorgJournal, resp)
			require.NoError(t, err)
			require.Len(t, steps, 3)
			for _, st := range steps {
				require.Equal(t, store.StepCompleted, st.Status, st.Key)
			}
			var key string
			require.NoError(t, pool.QueryRow(ctx, `SELECT output->>'external_id' FROM rflow.reorg_step_runs WHERE run_id = $1 AND step_key = 'pay1'`, resp).Scan(&key))
			var runID uuid.UUID
			require.NoError(t, pool.QueryRow(ctx, `SELECT run_id FROM rflow.reorg_runs WHERE id = $1`, resp).Scan(&runID))
			require.Equal(t, fmt.Sprintf("rflow-reorg:%s:%d:pay1:1", runID, orphan.BlockNumber.Int64()), key)

			// The operator's view: runs show has the response and its
			// steps; runs list --compensated finds the run.
			out, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "show", runID.String(), "-c", config)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, "reorg response "+resp.String())
			require.Contains(t, out, fmt.Sprintf("fork      block %d on chain 31337, depth 1", orphan.BlockNumber.Int64()))
			require.Regexp(t, `pay2\s+send\s+completed\s+1`, out)
			out, stderr, code = rflowCmd(t, "--database-url", dbURL, "runs", "show", runID.String(), "-c", config, "-o", "json")
			require.Equal(t, 0, code, stderr)
			var detail struct {
				Status string `json:"status"`
				Reorgs []struct {
					ID     uuid.UUID `json:"id"`
					Status string    `json:"status"`
					Steps  []struct {
						Key string `json:"step_key"`
					} `json:"steps"`
				} `json:"reorg_responses"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &detail))
			require.Len(t, detail.Reorgs, 1)
			require.Equal(t, "completed", detail.Reorgs[0].Status)
			require.Len(t, detail.Reorgs[0].Steps, 3)
			for _, flags := range [][]string{{"--compensated"}, {}} {
				out, stderr, code = rflowCmd(t, append([]string{"--database-url", dbURL, "runs", "list", "-c", config, "-o", "json"}, flags...)...)
				require.Equal(t, 0, code, stderr)
				var list struct {
					Runs []struct {
						ID uuid.UUID `json:"id"`
					} `json:"runs"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &list))
				require.Len(t, list.Runs, 1, flags)
				require.Equal(t, runID, list.Runs[0].ID)
			}
		})
	}
}
