package jobs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/workflow"
)

// TestReadResultsByNameAndPosition: read triggers on the Reserves contract
// (testdata/contracts) on a real anvil. getReserves() has three named
// outputs: when: and the step read them as result.reserve0 and result[1],
// like ethers' Result; quote() has two unnamed ones, read as result[0] and
// result.arg1. A result is still one object by name in a request body.
func TestReadResultsByNameAndPosition(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	raw, err := os.ReadFile(anviltest.ContractPath(t, "Reserves.abi.json"))
	require.NoError(t, err)
	a, err := abi.JSON(bytes.NewReader(raw))
	require.NoError(t, err)
	pair := anviltest.Deploy(t, node, a, anviltest.ContractPath(t, "Reserves.bin"), 0)
	pair.Transact("set", big.NewInt(100), big.NewInt(200))
	recv := newReceiver(t)
	project := fmt.Sprintf(`
name: positions
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
contracts:
  - { name: Pair, abi: ./Reserves.json, network: local, address: %q }
workflows:
  - name: reserves
    trigger: { read: { contract: Pair, function: getReserves, every: 1 block,
                       when: "${{ result.reserve0 == 100 && result[1] == 200 && result[2] > 0 }}" } }
    steps:
      - id: tell
        if: "${{ result[0] * 2 == result.reserve1 && trigger.result[1] == 200 }}"
        http_call:
          method: POST
          url: "%[3]s/reserves"
          body: { first: "${{ result[0] }}", second: "${{ trigger.result[1] }}", named: "${{ result.reserve1 }}", all: "${{ result }}" }
  - name: quote
    trigger: { read: { contract: Pair, function: quote, every: 1 block, when: "${{ result[0] == 200 }}" } }
    steps:
      - id: tell
        http_call: { method: POST, url: "%[3]s/quote", body: { amount: "${{ result[0] }}", who: "${{ result[1] }}", by_name: "${{ result.arg1 }}" } }
`, node.URL, pair.Address.Hex(), recv.URL)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Reserves.json"), raw, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(project), 0o644))
	p, err := workflow.Load(filepath.Join(dir, "rflow.yaml"), workflow.LoadOptions{})
	require.NoError(t, err, "validate accepts result.reserve0 and result[0]")
	pool, e := deployed(t, p)
	runChain(t, pool, e)

	require.Eventually(t, func() bool {
		node.Mine(1)
		return len(recv.got("/reserves")) > 0 && len(recv.got("/quote")) > 0
	}, 30*time.Second, 100*time.Millisecond)
	var r struct {
		First, Second, Named string
		All                  map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(recv.got("/reserves")[0].Body), &r))
	require.Equal(t, "100", r.First)
	require.Equal(t, "200", r.Second)
	require.Equal(t, "200", r.Named)
	require.Equal(t, "100", r.All["reserve0"], "the result is one object by name")
	require.Equal(t, "200", r.All["reserve1"])
	require.Len(t, r.All, 3)
	var q map[string]any
	require.NoError(t, json.Unmarshal([]byte(recv.got("/quote")[0].Body), &q))
	require.Equal(t, "200", q["amount"])
	require.Equal(t, pair.Address.Hex(), q["who"])
	require.Equal(t, pair.Address.Hex(), q["by_name"])
}
