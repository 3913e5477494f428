package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// approvalProject gates every send of pipeline (1h to decide) and of brief
// (8s, then rejected by the timeout).
const approvalProject = `
name: gates
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: pay
        send:
          wallet: ops
          to: "0x000000000000000000000000000000000000dEaD"
          value: "${{ gwei(1) }}"
          approval: { timeout: 1h }
  - name: brief
    trigger: { manual: {} }
    steps:
      - id: pay
        send:
          wallet: ops
          to: "0x000000000000000000000000000000000000dEaD"
          value: "${{ gwei(1) }}"
          approval: { timeout: 8s, on_timeout: reject }
`

// TestCrashApprovals kills `rflow start` while runs are parked on their
// approvals, then decides them with the CLI while no process runs, then
// kills the next process between an approval and its broadcast (before the
// re-simulation, before the relayer insert, before the broadcast). After a
// clean restart every approved send has gone out exactly once (the wallet's
// on-chain nonce moved by exactly the number approved), and the rejected,
// expired and cancelled ones never did.
func TestCrashApprovals(t *testing.T) {
	t.Parallel()
	for _, point := range []string{jobs.FaultBeforeResimulate, jobs.FaultAfterJournal, "relayer.after-queue"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
			_, from := anviltest.Key(t, 3)
			config := filepath.Join(t.TempDir(), "rflow.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(approvalProject, node.URL, "0x"+anviltest.DevKeys[3])), 0o644))
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(ctx, dbURL)
			require.NoError(t, err)
			defer pool.Close()
			before, err := node.Client().NonceAt(ctx, from, nil)
			require.NoError(t, err)

			const gated = 5 // 3 approved, 1 rejected, 1 cancelled
			enqueueWorkflowRuns(t, pool, config, "pipeline", "p", gated)
			enqueueWorkflowRuns(t, pool, config, "brief", "b", 1)
			p := startRflow(t, dbURL, config, "")
			pending := waitPending(t, pool, gated+1)
			p.kill() // SIGKILL while every run is parked on its gate

			var runs []uuid.UUID
			for _, a := range pending {
				if a.Workflow == "pipeline" {
					runs = append(runs, a.RunID)
				}
			}
			require.Len(t, runs, gated)
			gate := func(run uuid.UUID) *store.Approval {
				aps, err := store.ListApprovals(ctx, pool, store.ApprovalFilter{RunID: run})
				require.NoError(t, err)
				require.Len(t, aps, 1)
				return aps[0]
			}
			cli := func(args ...string) (string, string, int) {
				return rflowCmd(t, append([]string{"--database-url", dbURL}, args...)...)
			}
			for _, run := range runs[:3] {
				short := store.ShortID(gate(run).ID)
				out, stderr, code := cli("approve", short, "-c", config, "--by", "alice", "--reason", "looks right")
				require.Equal(t, 0, code, stderr)
				require.Contains(t, out, "approved by alice")
			}
			// The same decision twice: exit 0, nothing new.
			out, stderr, code := cli("approve", gate(runs[0]).ID.String(), "-c", config, "--by", "bob", "-o", "json")
			require.Equal(t, 0, code, stderr)
			var again struct {
				Status    string `json:"status"`
				DecidedBy string `json:"decided_by"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &again))
			require.Equal(t, "approved", again.Status)
			require.Equal(t, "alice", again.DecidedBy)
			// A conflicting decision: exit 1, saying so.
			_, stderr, code = cli("reject", store.ShortID(gate(runs[0]).ID), "-c", config)
			require.Equal(t, 1, code)
			require.Contains(t, stderr, "already approved by alice")

			_, stderr, code = cli("reject", store.ShortID(gate(runs[3]).ID), "-c", config, "--reason", "wrong address")
			require.Equal(t, 0, code, stderr)
			_, stderr, code = cli("runs", "cancel", runs[4].String())
			require.Equal(t, 0, code, stderr)
			require.Equal(t, store.ApprovalCancelled, gate(runs[4]).Status)
			_, stderr, code = cli("approve", store.ShortID(gate(runs[4]).ID), "-c", config)
			require.Equal(t, 1, code, "a cancelled run's gate cannot be approved")
			require.Contains(t, stderr, "cancelled")

			out, _, code = cli("approvals", "list")
			require.Equal(t, 0, code)
			require.Contains(t, out, "ID  ")
			require.Contains(t, out, store.ShortID(gate(runs[3]).ID))
			require.Contains(t, out, "rejected")
			require.Contains(t, out, "send 0.000000001 ETH (1000000000 wei) to 0x000000000000000000000000000000000000dEaD from ops on local")
			_, stderr, code = cli("approvals", "list", "--status", "maybe")
			require.Equal(t, 2, code)
			require.Contains(t, stderr, "not an approval status")
			out, _, code = cli("approvals", "list", "--status", "approved", "-o", "json")
			require.Equal(t, 0, code)
			var listed struct {
				Approvals []struct {
					ID string `json:"id"`
				} `json:"approvals"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &listed))
			require.Len(t, listed.Approvals, 3)

			startRflow(t, dbURL, config, point).waitKilled(t, 60*time.Second)
			p = startRflow(t, dbURL, config, "")
			final := waitRunsEnded(t, pool, gated+1, 90*time.Second)
			p.stop(t)

			after, err := node.Client().NonceAt(ctx, from, nil)
			require.NoError(t, err)
			require.Equal(t, before+3, after, "exactly one transaction per approved send, none for the others")
			var txs int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions`).Scan(&txs))
			require.Equal(t, 3, txs, "the relayer saw only the approved sends")
			for i, run := range runs {
				r := final[run]
				switch {
				case i < 3:
					require.Equal(t, store.RunCompleted, r.Status, "approved run %d", i)
				case i == 3:
					require.Equal(t, store.RunFailed, r.Status)
					require.Contains(t, *r.Error, "approval rejected by cli:")
					require.Contains(t, *r.Error, "wrong address")
				default:
					require.Equal(t, store.RunCancelled, r.Status)
				}
			}
			for id, r := range final {
				if r.Workflow == "brief" {
					require.Equal(t, store.RunFailed, r.Status)
					require.Contains(t, *r.Error, "expired", "run %s", id)
				}
			}

			out, _, code = cli("runs", "show", runs[0].String())
			require.Equal(t, 0, code)
			require.Contains(t, out, "approved by alice at ")
			require.Contains(t, out, ": looks right")
		})
	}
}

// waitPending waits until n approvals are pending and returns them.
func waitPending(t *testing.T, pool *pgxpool.Pool, n int) []*store.Approval {
	t.Helper()
	var aps []*store.Approval
	require.Eventually(t, func() bool {
		var err error
		aps, err = store.ListApprovals(context.Background(), pool, store.ApprovalFilter{Status: store.ApprovalPending})
		return err == nil && len(aps) == n
	}, 60*time.Second, 50*time.Millisecond, "never %d pending approvals", n)
	return aps
}

// waitRunsEnded waits until n runs have ended and returns every run by id.
func waitRunsEnded(t *testing.T, pool *pgxpool.Pool, n int, within time.Duration) map[uuid.UUID]*store.Run {
	t.Helper()
	out := map[uuid.UUID]*store.Run{}
	require.Eventually(t, func() bool {
		all, err := store.ListRuns(context.Background(), pool, store.RunFilter{Limit: 1000})
		if err != nil {
			return false
		}
		ended := 0
		for _, r := range all {
			out[r.ID] = r
			if r.Status.Terminal() {
				ended++
			}
		}
		return ended == n
	}, within, 100*time.Millisecond, "runs never ended")
	return out
}
