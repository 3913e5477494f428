package main

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const finalityProject = `
name: finality
networks:
  - { name: dev, chain_id: %d, rpc: %q, confirmations: 1, block_poll_interval: 100ms%s }
contracts:
  - { name: Vault, abi: ./Vault.json, network: dev, address: %q, start_block: 0 }
workflows:
  - name: final-deposit
    trigger: { event: { contract: Vault, event: Deposit, run_on: finalized } }
    steps:
      - id: paid
        http_call: { method: POST, url: "%[5]s/paid" }
  - name: claim-saga
    trigger: { event: { contract: Vault, event: Deposit, run_on: head } }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.event.amount }}" }
          confirmations: finalized
      - id: told
        http_call: { method: POST, url: "%[5]s/told" }
`

func writeFinalityProject(t *testing.T, chainID int64, rpc, finality, address, sink string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(finalityProject, chainID, rpc, finality, address, sink)), 0o644))
	return config
}

// stepCalls counts the sink's requests of step (keys end in :<step>).
func stepCalls(s *sink, step string) int {
	n := 0
	for k, c := range s.counts() {
		if strings.HasSuffix(k, ":"+step) {
			n += c
		}
	}
	return n
}

// On geth --dev (v1.17.10's simulated beacon: safe is the head, finalized
// the last multiple of 32 at or below it), `rflow start` runs a
// run_on: finalized workflow only once its log's block is finalized, and a
// wait_for with confirmations: finalized settles only then: blocks far
// past the network's confirmations: 1 are not enough.
func TestFinalityTagsOnGeth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := gethtest.Start(t, gethtest.Options{})
	em := anviltest.DeployEmitter(t, node)
	finalized := func() uint64 {
		var b struct {
			Number hexutil.Uint64 `json:"number"`
		}
		node.Call(&b, "eth_getBlockByNumber", "finalized", false)
		return uint64(b.Number)
	}
	// Room below the next epoch boundary for the deposit, the claim and the
	// blocks on top of them.
	if node.BlockNumber()%32 > 20 {
		node.Mine(int(33 - node.BlockNumber()%32))
	}
	s := newSink(t)
	config := writeFinalityProject(t, gethtest.ChainID, node.URL, ", finality: tags", em.Address.Hex(), s.URL)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()

	p := startRflow(t, dbURL, config, "")
	waitFeed(t, pool)
	dep := em.Deposit(7).BlockNumber.Uint64()
	waitsIn(t, pool, 1, store.WaitWaiting)
	claim := em.Transact("claim", big.NewInt(7)).BlockNumber.Uint64()
	waitsIn(t, pool, 1, store.WaitArmed)
	node.Mine(5)
	head := node.BlockNumber()
	require.Less(t, finalized(), dep, "the test needs the deposit above the finalized block")
	require.Equal(t, head/32, dep/32, "still within one epoch")
	time.Sleep(3 * time.Second) // many polls with the log 5+ blocks deep
	require.Zero(t, stepCalls(s, "paid"), "a run_on: finalized run before its block is finalized")
	require.Zero(t, stepCalls(s, "told"), "a confirmations: finalized wait settled before its block is finalized")
	waitsIn(t, pool, 1, store.WaitArmed)
	// Readiness and lag measure the finalized cursor against the finalized
	// block: blocks arriving above it are not a stall.
	lags, err := store.CursorLags(ctx, pool)
	require.NoError(t, err)
	found := false
	for _, l := range lags {
		if l.Task == "event/final-deposit" && l.Phase == "finalized" {
			found = true
			require.Equal(t, int64(finalized()), l.Head, "lag measured against the finalized block")
			require.False(t, l.Stalled(time.Second), "a finalized cursor waiting for the next epoch is not stalled: %+v", l)
		}
	}
	require.True(t, found, "the finalized cursor: %+v", lags)

	// Up to the next boundary: geth finalizes it, the deposit and the claim
	// with it.
	node.Mine(int(32 - head%32))
	require.GreaterOrEqual(t, finalized(), claim)
	require.Eventually(t, func() bool { return stepCalls(s, "paid") == 1 && stepCalls(s, "told") == 1 },
		60*time.Second, 100*time.Millisecond, "finalized: the run starts and the wait settles; output:\n%s", p.out)
	var phase string
	require.NoError(t, pool.QueryRow(ctx, `SELECT trigger->>'phase' FROM rflow.workflow_runs WHERE workflow_name = 'final-deposit'`).Scan(&phase))
	require.Equal(t, "finalized", phase)
	saga := waitsIn(t, pool, 1, store.WaitMatched)[7]
	out, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "show", saga.String(), "-c", config)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "on chain 1337, until finalized, from block")
	out, stderr, code = rflowCmd(t, "--database-url", dbURL, "runs", "show", saga.String(), "-c", config, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"finality": "finalized"`)
	node.Mine(2)
	time.Sleep(time.Second)
	require.Equal(t, 1, stepCalls(s, "paid"))
	require.Equal(t, 1, stepCalls(s, "told"))
	p.stop(t)
}

// A node that answers the finality tags with null: `rflow start` refuses,
// naming the network, the tag and each workflow that needs it, instead of
// running tagged triggers that would never fire. validate, which asks no
// node, warns where the network declares nothing and errors where it
// declares finality: none.
func TestStartRefusesANodeWithoutFinalityTags(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	proxy := anviltest.WithoutFinalityTags(t, node.URL)
	s := newSink(t)
	config := writeFinalityProject(t, anviltest.ChainID, proxy, "", "0x5FbDB2315678afecb367f032d93F642f64180aa3", s.URL)

	out, stderr, code := rflowCmd(t, "validate", "-c", config)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, config+`:9:66: warning: event trigger run_on: finalized: network dev does not declare finality: tags`)
	require.Contains(t, stderr, config+`:19:26: warning: wait_for confirmations: finalized: network dev does not declare finality: tags`)
	require.Contains(t, out, "2 warnings")

	p := startRflowArgs(t, nil, "--database-url", storetest.URL(t), "start", "-c", config)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("rflow start did not refuse; output:\n%s", p.out)
	}
	require.Equal(t, 1, p.cmd.ProcessState.ExitCode(), "output:\n%s", p.out)
	require.Contains(t, p.out.String(), `network dev: the node answers eth_getBlockByNumber("finalized") with null: it serves no finality tags, `+
		"but workflows need it: workflow final-deposit: trigger run_on: finalized; "+
		"workflow claim-saga: step claimed wait_for confirmations: finalized.")
	require.NotContains(t, p.out.String(), "deployed workflow", "checked before anything is deployed")

	none := writeFinalityProject(t, anviltest.ChainID, proxy, ", finality: none", "0x5FbDB2315678afecb367f032d93F642f64180aa3", s.URL)
	_, stderr, code = rflowCmd(t, "validate", "-c", none)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, none+":9:66: event trigger run_on: finalized: network dev declares finality: none")
	require.Contains(t, stderr, none+":19:26: wait_for confirmations: finalized: network dev declares finality: none")
}
