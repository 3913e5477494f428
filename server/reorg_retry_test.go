package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
)

// TestRetryRouteRetriesFailedReorgResponse: POST /v1/runs/{id}/retry on a
// compensated run whose on_reorg response failed retries the response from
// its failed step (the run is answered as it is); once the response
// completed, another retry is 409.
func TestRetryRouteRetriesFailedReorgResponse(t *testing.T) {
	t.Parallel()
	c := newCalls(t)
	abi := filepath.Join(t.TempDir(), "Vault.json")
	require.NoError(t, os.WriteFile(abi, anviltest.EmitterABIJSON(t), 0o600))
	b := newBundle(t, fmt.Sprintf(`
name: reorgretry
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 0 }
contracts:
  - { name: Vault, abi: %q, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: credit
    trigger:
      event: { contract: Vault, event: Deposit, run_on: head }
    steps:
      - id: act
        http_call: { method: POST, url: "%[2]s/act" }
    on_reorg:
      - id: undo
        http_call: { method: POST, url: "%[2]s/undo", retry: { max_attempts: 1 } }
`, abi, c.URL), true)
	c.mu.Lock()
	c.fail500["/undo"] = 1
	c.mu.Unlock()

	const fork = 5
	var runID uuid.UUID
	require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := b.engine.ClaimTx(b.ctx, tx, []store.Claim{{Workflow: "credit", TriggerKey: "31337:0x" + fmt.Sprintf("%064x", 1) + ":tx0",
			TriggerKind: "event", Trigger: []byte(`{"event": {"amount": 3}, "block": 5, "phase": "head"}`),
			ChainID: 31337, BlockNumber: fork, BlockHash: "0xaa"}}); err != nil {
			return err
		}
		return tx.QueryRow(b.ctx, `SELECT id FROM rflow.workflow_runs`).Scan(&runID)
	}))
	require.Eventually(t, func() bool { return c.count("/act") == 1 }, 20*time.Second, 20*time.Millisecond)
	var canonical []store.IndexedBlock
	for n := int64(fork); n <= fork+300; n++ {
		canonical = append(canonical, store.IndexedBlock{Number: n, Hash: fmt.Sprintf("0x%064x", n), ParentHash: fmt.Sprintf("0x%064x", n-1)})
	}
	require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
		ids, err := store.ApplyReorg(b.ctx, tx, store.ReorgRecord{ChainID: 31337, ForkBlock: fork, Depth: 1, OldHash: "0xaa",
			NewHash: canonical[0].Hash}, canonical, 1000)
		if err != nil {
			return err
		}
		return b.engine.ChainConfig().OnReorg(b.ctx, tx, chain.Reorg{ChainID: 31337, ForkBlock: fork, Depth: 1, OrphanedRuns: ids,
			OldHash: "0xaa", NewHash: canonical[0].Hash})
	}))
	response := func(want store.RunStatus) {
		t.Helper()
		require.Eventually(t, func() bool {
			rs, err := store.RunResponses(b.ctx, b.pool, runID)
			require.NoError(t, err)
			return len(rs) == 1 && rs[0].Status == want
		}, 30*time.Second, 20*time.Millisecond, "the response never became %s", want)
	}
	response(store.RunFailed)

	r := b.api(t, http.MethodPost, "/v1/runs/"+runID.String()+"/retry", "retry-response", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "completed", r.json(t)["run"].(map[string]any)["status"], "the run is answered as it is")
	response(store.RunCompleted)
	require.Equal(t, 2, c.count("/undo"))
	require.Equal(t, 1, c.count("/act"))

	r = b.api(t, http.MethodPost, "/v1/runs/"+runID.String()+"/retry", "retry-again", nil)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
}
