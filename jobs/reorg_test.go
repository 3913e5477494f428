package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// reorgProject is a head-phase workflow whose steps are
// wait1 (delay) → act (http) → wait2 (delay) → act2 (http), and whose
// on_reorg: response is undo (http, told what the run had done) →
// pause (delay) → refund (a compensation send from the ops wallet).
// The delays place the reorg at a chosen phase of the run or response.
func reorgProject(node *anviltest.Node, em *anviltest.Emitter, recv *receiver, runOn, wait1, wait2, pause string) string {
	return fmt.Sprintf(`
name: reorgs
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 6, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "${OPS_KEY}" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: credit
    trigger:
      event: { contract: Vault, event: Deposit, run_on: %s }
    steps:
      - { id: wait1, delay: %s }
      - id: act
        http_call: { method: POST, url: "%[7]s/act", body: "${{ event.amount }}" }
      - { id: wait2, delay: %[5]s }
      - id: act2
        http_call: { method: POST, url: "%[7]s/act2", body: "${{ event.amount }}" }
    on_reorg:
      - id: undo
        http_call:
          method: POST
          url: "%[7]s/undo"
          body:
            fork: "${{ reorg.fork_block }}"
            depth: "${{ reorg.depth }}"
            old: "${{ reorg.old_hash }}"
            run: "${{ run.id }}"
            run_status: "${{ reorg.run_status }}"
            wait1: "${{ steps.wait1?.status ?? 'none' }}"
            act: "${{ steps.act?.status ?? 'none' }}"
            act_n: "${{ steps.act?.output?.body?.n ?? 0 }}"
            act2: "${{ steps.act2?.status ?? 'none' }}"
            amount: "${{ event.amount }}"
      - { id: pause, delay: %[6]s }
      - id: refund
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}" }
`, node.URL, em.Address.Hex(), runOn, wait1, wait2, pause, recv.URL)
}

type reorgBundle struct {
	pool *pgxpool.Pool
	node *anviltest.Node
	em   *anviltest.Emitter
	recv *receiver
	ops  common.Address
}

// newReorgBundle starts anvil (mining only when told), the Emitter, an
// engine with the relayer and the chain service, for the project made by
// yaml.
func newReorgBundle(t *testing.T, yaml func(*anviltest.Node, *anviltest.Emitter, *receiver) string) *reorgBundle {
	t.Helper()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	_, ops := anviltest.Key(t, 1)
	project := chainProject(t, yaml(node, em, recv), func(k string) (string, bool) {
		if k == "OPS_KEY" {
			return anviltest.DevKeys[1], true
		}
		return os.LookupEnv(k)
	})
	pool, e := deployed(t, project)
	runChain(t, pool, e)
	return &reorgBundle{pool: pool, node: node, em: em, recv: recv, ops: ops}
}

// runChain runs the chain service of e's project, claiming through e, until
// the test ends.
func runChain(t *testing.T, pool *pgxpool.Pool, e *jobs.Engine) {
	t.Helper()
	ctx := context.Background()
	svc, err := chain.NewService(ctx, pool, e, e.ChainConfig(), nil)
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(sctx) }()
	t.Cleanup(func() { cancel(); <-done; svc.Close() })
}

// mining mines a block every 150ms until the test ends or stop is
// called: the fork reaches the network's depth and sends confirm.
func (b *reorgBundle) mining(t *testing.T) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(150 * time.Millisecond):
				b.node.Call(nil, "anvil_mine", hexutil.Uint64(1))
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (b *reorgBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// headRun waits for the head-phase run of a deposit and returns its id.
func (b *reorgBundle) headRun(t *testing.T, tx common.Hash, both bool) uuid.UUID {
	t.Helper()
	key := chain.EventKey(anviltest.ChainID, tx, 0, chain.PhaseHead, both)
	var id uuid.UUID
	eventually(t, 20*time.Second, "the head-phase run", func() bool {
		return b.pool.QueryRow(context.Background(), `SELECT id FROM rflow.workflow_runs WHERE trigger_key = $1`, key).Scan(&id) == nil
	})
	return id
}

// atTip waits until the chain service's window holds the node's head, so
// a reorg now is seen as one.
func (b *reorgBundle) atTip(t *testing.T) {
	t.Helper()
	head := b.node.BlockNumber()
	eventually(t, 10*time.Second, "the window at the tip", func() bool {
		return b.count(t, `SELECT count(*) FROM indexer.blocks WHERE number = $1`, head) == 1
	})
}

// response waits for the run's response to reach status and returns it.
func (b *reorgBundle) response(t *testing.T, run uuid.UUID, status store.RunStatus) *store.Response {
	t.Helper()
	var rs []*store.Response
	eventually(t, 40*time.Second, "response "+string(status), func() bool {
		var err error
		rs, err = store.RunResponses(context.Background(), b.pool, run)
		require.NoError(t, err)
		return len(rs) == 1 && rs[0].Status == status
	})
	return rs[0]
}

func (b *reorgBundle) opsNonce(t *testing.T) uint64 {
	t.Helper()
	n, err := b.node.Client().NonceAt(context.Background(), b.ops, nil)
	require.NoError(t, err)
	return n
}

// TestOnReorgCompensatesOncePerFork: a deposit log claimed at head and
// then orphaned by anvil_reorg (depths 1–5), at each phase of its run —
// before it acts, mid-run, after it completed, and again during its
// response — stops the run at its next step boundary, and runs the
// on_reorg: response exactly once: one undo call that sees what the run had
// completed and the reorg, and one compensation send, counted on chain by
// the ops wallet's nonce. No confirmed-phase run is ever claimed for the
// orphaned log (run_on: both).
func TestOnReorgCompensatesOncePerFork(t *testing.T) {
	t.Parallel()
	cases := []struct {
		phase               string
		depth               int
		wait1, wait2, pause string
		acted, acted2       int    // /act and /act2 calls
		wait1Status, act    string // what the response sees of them
		runStatus           store.RunStatus
		// held is the step the run stops at while its response is
		// pending (mining waits until it is held): a delay whose job
		// comes due after the reorg is not completed.
		held string
	}{
		{phase: "before", depth: 1, wait1: "2s", wait2: "1ms", pause: "1ms", wait1Status: "cancelled", act: "none", runStatus: store.RunCancelled, held: "wait1"},
		{phase: "mid", depth: 2, wait1: "1ms", wait2: "2s", pause: "1ms", acted: 1, wait1Status: "completed", act: "completed", runStatus: store.RunCancelled, held: "wait2"},
		{phase: "after", depth: 3, wait1: "1ms", wait2: "1ms", pause: "1ms", acted: 1, acted2: 1, wait1Status: "completed", act: "completed", runStatus: store.RunCompleted},
		{phase: "response", depth: 4, wait1: "1ms", wait2: "1ms", pause: "4s", acted: 1, acted2: 1, wait1Status: "completed", act: "completed", runStatus: store.RunCompleted},
		{phase: "mid-deep", depth: 5, wait1: "1ms", wait2: "2s", pause: "1ms", acted: 1, wait1Status: "completed", act: "completed", runStatus: store.RunCancelled, held: "wait2"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/depth%d", tc.phase, tc.depth), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newReorgBundle(t, func(n *anviltest.Node, em *anviltest.Emitter, r *receiver) string {
				return reorgProject(n, em, r, "both", tc.wait1, tc.wait2, tc.pause)
			})
			nonce := b.opsNonce(t)
			orphan := b.em.Deposit(7)
			if tc.depth > 1 {
				b.node.Mine(tc.depth - 1) // the log sits depth blocks below the head
			}
			runID := b.headRun(t, orphan.TxHash, true)
			if tc.runStatus == store.RunCompleted {
				eventually(t, 20*time.Second, "the run completed", func() bool {
					return b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE id = $1 AND status = 'completed'`, runID) == 1
				})
			}
			if tc.acted > 0 {
				eventually(t, 20*time.Second, "the run acted", func() bool { return len(b.recv.got("/act")) == tc.acted })
			}
			b.atTip(t)
			b.node.Reorg(tc.depth)
			eventually(t, 20*time.Second, "the orphan marked", func() bool {
				return b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE id = $1 AND orphaned_at IS NOT NULL`, runID) == 1
			})
			if tc.held != "" {
				// The fork is not deep enough yet: the run reaches its next
				// step boundary and stops there, its step held, no job.
				eventually(t, 10*time.Second, "step "+tc.held+" held", func() bool {
					return b.count(t, `SELECT count(*) FROM rflow.step_runs WHERE run_id = $1 AND step_key = $2
						AND status = 'waiting' AND held_at IS NOT NULL`, runID, tc.held) == 1
				})
				require.Equal(t, 1, b.count(t, `SELECT count(*) FROM rflow.reorg_runs WHERE run_id = $1 AND status = 'pending'`, runID))
				time.Sleep(500 * time.Millisecond)
				require.Len(t, b.recv.got("/act"), tc.acted, "nothing after a held step runs")
				require.Empty(t, b.recv.got("/act2"), "nothing after a held step runs")
			}
			b.mining(t)
			if tc.phase == "response" {
				eventually(t, 40*time.Second, "the response under way", func() bool { return len(b.recv.got("/undo")) == 1 })
				// A second reorg while the response runs changes nothing
				// about it: the run is already an orphan of its fork.
				b.atTip(t)
				b.node.Reorg(2)
			}
			resp := b.response(t, runID, store.RunCompleted)
			require.Equal(t, orphan.BlockNumber.Int64(), resp.ForkBlock)
			require.Equal(t, tc.depth, resp.Depth)

			undos := b.recv.got("/undo")
			require.Len(t, undos, 1, "one response per (run, fork)")
			var seen map[string]any
			require.NoError(t, json.Unmarshal([]byte(undos[0].Body), &seen))
			require.Equal(t, float64(resp.ForkBlock), seen["fork"])
			require.Equal(t, float64(tc.depth), seen["depth"])
			require.Equal(t, resp.OldHash, seen["old"])
			require.Equal(t, runID.String(), seen["run"], "run is the orphaned run")
			require.Equal(t, string(tc.runStatus), seen["run_status"])
			require.Equal(t, tc.wait1Status, seen["wait1"])
			require.Equal(t, tc.act, seen["act"])
			require.Equal(t, "7", seen["amount"], "the response sees the trigger (a uint256: a decimal string)")
			if tc.acted > 0 {
				require.Equal(t, float64(1), seen["act_n"], "the response sees the run's step output")
			}

			run, err := store.GetRun(ctx, b.pool, runID, false)
			require.NoError(t, err)
			require.Equal(t, tc.runStatus, run.Status)

			// The compensation send: journaled under its rflow-reorg key
			// in the response's journal, exactly one transaction on chain.
			steps, err := store.JournalSteps(ctx, b.pool, store.ReorgJournal, resp.ID)
			require.NoError(t, err)
			require.Len(t, steps, 3)
			var refund map[string]any
			for _, s := range steps {
				require.Equal(t, store.StepCompleted, s.Status, s.Key)
				if s.Key == "refund" {
					require.NoError(t, json.Unmarshal(s.Output, &refund))
				}
			}
			require.Equal(t, fmt.Sprintf("rflow-reorg:%s:%d:refund:1", runID, resp.ForkBlock), refund["external_id"])
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM relayer.transactions WHERE external_id LIKE 'rflow-reorg:%'`))
			eventually(t, 20*time.Second, "the refund on chain", func() bool { return b.opsNonce(t) == nonce+1 })

			// Bury the fork: the orphaned log never gets its confirmed-phase
			// run, the run never acts again, nothing is sent twice.
			time.Sleep(2 * time.Second)
			require.Equal(t, 0, b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key = $1`,
				chain.EventKey(anviltest.ChainID, orphan.TxHash, 0, chain.PhaseConfirmed, true)))
			require.Len(t, b.recv.got("/act"), tc.acted)
			require.Len(t, b.recv.got("/act2"), tc.acted2)
			require.Len(t, b.recv.got("/undo"), 1)
			require.Equal(t, nonce+1, b.opsNonce(t), "one compensation send per response step")
			require.Equal(t, 1, b.count(t, `SELECT count(*) FROM rflow.reorg_runs`))
		})
	}
}

// TestReincludedLogIsNotAnOrphan: a log a reorg removes and the new
// canonical chain includes again (the same signed transaction, so the same
// tx hash and log index) is not an orphan in the end: the run, held at its
// step boundary meanwhile, goes on and acts once; no on_reorg response
// runs, and the confirmed-phase run is claimed as usual.
func TestReincludedLogIsNotAnOrphan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newReorgBundle(t, func(n *anviltest.Node, em *anviltest.Emitter, r *receiver) string {
		return reorgProject(n, em, r, "both", "4s", "1ms", "1ms")
	})
	orphan := b.em.Deposit(7)
	b.node.Mine(1)
	runID := b.headRun(t, orphan.TxHash, true)
	raw := b.node.RawTx(orphan.TxHash)
	b.atTip(t)
	b.node.ReorgWith(2, anviltest.ReorgTx{Raw: raw, Block: 0})
	rec, err := b.node.Client().TransactionReceipt(ctx, orphan.TxHash)
	require.NoError(t, err)
	require.NotEqual(t, orphan.BlockHash, rec.BlockHash, "a new block")
	require.Equal(t, orphan.Logs[0].Index, rec.Logs[0].Index, "the same log index")
	b.mining(t)

	resp := b.response(t, runID, store.RunReincluded)
	require.Equal(t, orphan.BlockNumber.Int64(), resp.ForkBlock)
	var run *store.Run
	eventually(t, 30*time.Second, "the run completed", func() bool {
		var err error
		run, err = store.GetRun(ctx, b.pool, runID, false)
		require.NoError(t, err)
		return run.Status == store.RunCompleted
	})
	require.Nil(t, run.OrphanedAt, "re-included: not an orphan")
	var hash string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT block_hash FROM rflow.workflow_runs WHERE id = $1`, runID).Scan(&hash))
	require.Equal(t, rec.BlockHash.Hex(), hash, "the run follows its log to the new block")
	eventually(t, 20*time.Second, "the confirmed-phase run", func() bool {
		return b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key = $1 AND status = 'completed'`,
			chain.EventKey(anviltest.ChainID, orphan.TxHash, 0, chain.PhaseConfirmed, true)) == 1
	})
	time.Sleep(time.Second)
	require.Len(t, b.recv.got("/undo"), 0, "no compensation")
	require.Len(t, b.recv.got("/act"), 2, "head and confirmed runs acted once each")
	require.Len(t, b.recv.got("/act2"), 2)
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM relayer.transactions`))
	list, err := store.ListRuns(ctx, b.pool, store.RunFilter{Compensated: true})
	require.NoError(t, err)
	require.Empty(t, list)
}

// eventually polls cond every 50ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
