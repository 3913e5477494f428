package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
)

// TestABIIntegersAreDecimalStringsInBodies: a Deposit of 42 wei on a real
// anvil. Wherever the ABI types a value uint256 (the arg, the whole event,
// the trigger's copy of it) an http_call or notify body carries it as
// "42", as it would carry 10^18; untyped numbers (the block, literals,
// arithmetic on the amount) stay JSON numbers. where: and if: still
// compute with the amount exactly, big integers included.
func TestABIIntegersAreDecimalStringsInBodies(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	recv := newReceiver(t)
	pool, _ := chainBundle(t, fmt.Sprintf(`
name: typed
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: typed
    trigger:
      event: { contract: Vault, event: Deposit, run_on: head,
               where: "${{ event.amount == 42 && event.amount * 10 ** 30 > 41 * 10 ** 30 }}" }
    steps:
      - id: tell
        if: "${{ event.amount + 2 ** 200 > 2 ** 200 && event.amount < ether('1') }}"
        http_call:
          method: POST
          url: "%[3]s/typed"
          body:
            amount: "${{ event.amount }}"
            event: "${{ event }}"
            trigger: "${{ trigger.event }}"
            list: ["${{ event.amount }}", 7]
            doubled: "${{ event.amount * 2 }}"
            literal: 42
            text: "amount ${{ event.amount }}"
      - id: notice
        notify: { webhook: "%[3]s/notice", body: { amount: "${{ event.amount }}", block: "${{ event.block }}" } }
`, node.URL, em.Address.Hex(), recv.URL))
	em.Deposit(42)

	require.Eventually(t, func() bool { return len(recv.got("/notice")) == 1 }, 30*time.Second, 50*time.Millisecond)
	var body struct {
		Amount  any            `json:"amount"`
		Event   map[string]any `json:"event"`
		Trigger map[string]any `json:"trigger"`
		List    []any          `json:"list"`
		Doubled any            `json:"doubled"`
		Literal any            `json:"literal"`
		Text    string         `json:"text"`
	}
	require.Len(t, recv.got("/typed"), 1)
	require.NoError(t, json.Unmarshal([]byte(recv.got("/typed")[0].Body), &body))
	require.Equal(t, "42", body.Amount)
	require.Equal(t, "42", body.Event["amount"])
	require.Equal(t, "42", body.Trigger["amount"])
	require.Equal(t, []any{"42", float64(7)}, body.List)
	require.IsType(t, float64(0), body.Event["block"], "the block is no ABI value: a number")
	require.IsType(t, float64(0), body.Event["log_index"])
	require.Equal(t, float64(84), body.Doubled, "arithmetic results are untyped numbers")
	require.Equal(t, float64(42), body.Literal)
	require.Equal(t, "amount 42", body.Text)

	var notice map[string]any
	require.NoError(t, json.Unmarshal([]byte(recv.got("/notice")[0].Body), &notice))
	require.Equal(t, "42", notice["amount"])
	require.IsType(t, float64(0), notice["block"])

	// The API and -o json show the run's trigger by the same rule; the
	// journal keeps the exact number.
	runs, err := store.ListRuns(context.Background(), pool, store.RunFilter{Workflow: "typed"})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	var shown, journal struct {
		Event map[string]any `json:"event"`
	}
	require.NoError(t, json.Unmarshal(server.NewRun(runs[0]).Trigger, &shown))
	require.Equal(t, "42", shown.Event["amount"])
	require.IsType(t, float64(0), shown.Event["block"])
	require.NoError(t, json.Unmarshal(runs[0].Trigger, &journal))
	require.Equal(t, float64(42), journal.Event["amount"])
}
