package jobs_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/store"
)

// A run parks on wait_for behind a provider that caps eth_getLogs at 5
// blocks, and the Claimed it waits for was mined 20 blocks before it parked:
// its lookback spans more than the provider takes at once. It is read in
// ranges the provider accepts, and the run resumes (before, the lookback
// was read in max_block_range chunks the provider refused forever). Here
// the provider is the fault proxy speaking geth's words in front of anvil.
func TestWaitForLookbackThroughRangeCappedProvider(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	proxy := rpcproxy.Start(t, node.URL)
	proxy.Set(rpcproxy.Faults{RangeLimit: 5, RangeStyle: rpcproxy.GethRange})
	lookbackThroughCappedRanges(t, proxy.URL, anviltest.ChainID, em, node.Mine)
	require.Positive(t, proxy.Refused(rpcproxy.RefusedRange), "the provider did refuse ranges")
}

// The same against geth itself, started with --rpc.rangelimit 5.
func TestWaitForLookbackOnGethRangeLimit(t *testing.T) {
	t.Parallel()
	node := gethtest.Start(t, gethtest.Options{RangeLimit: 5})
	em := anviltest.DeployEmitter(t, node)
	lookbackThroughCappedRanges(t, node.URL, gethtest.ChainID, em, node.Mine)
}

func lookbackThroughCappedRanges(t *testing.T, rpcURL string, chainID int64, em *anviltest.Emitter, mine func(int)) {
	t.Helper()
	recv := newReceiver(t)
	pool, _ := chainBundle(t, fmt.Sprintf(`
name: capped
networks:
  - { name: local, chain_id: %d, rpc: %q, confirmations: 20, block_poll_interval: 50ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: saga
    trigger:
      event: { contract: Vault, event: Deposit, run_on: confirmed }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.event.amount }}" }
          confirmations: 1
      - id: tell
        http_call: { method: POST, url: "%s/claimed", body: { tx: "${{ steps.claimed.output.tx_hash }}" } }
`, chainID, rpcURL, em.Address.Hex(), recv.URL))
	time.Sleep(time.Second) // the feed starts at the current head
	em.Deposit(5)
	rc := em.Transact("claim", big.NewInt(5))
	mine(21)
	run := onlyRun(t, pool, "saga")
	b := &testBundle{pool: pool, recv: recv}
	require.Equal(t, store.RunCompleted, b.waitRun(t, run.ID).Status)
	bodies := recv.got("/claimed")
	require.Len(t, bodies, 1)
	require.Contains(t, bodies[0].Body, rc.TxHash.Hex())
}
