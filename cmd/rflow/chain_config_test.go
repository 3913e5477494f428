package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

const chainProject = `
name: chaincheck
networks:
  - { name: local, chain_id: %d, rpc: %s, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Emitter, abi: ./Emitter.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: on-deposit
    trigger: { event: { contract: Emitter, event: Deposit } }
    steps:
      - id: noop
        noop: {}
`

func writeChainProject(t *testing.T, chainID int64, rpc string) string {
	t.Helper()
	return writeChainProjectRPC(t, chainID, strconv.Quote(rpc))
}

// writeChainProjectRPC is writeChainProject with rpc: as YAML (a list).
func writeChainProjectRPC(t *testing.T, chainID int64, rpc string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Emitter.json"), anviltest.EmitterABIJSON(t), 0o644))
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(chainProject, chainID, rpc)), 0o644))
	return path
}

// A chain_id that differs from what the node reports never heals: `rflow
// start` exits 1 at once, naming the network, both chain ids and the fix,
// without the URL's credentials. A node that is only down is not a
// configuration error: the process keeps running and retries.
func TestStartStopsOnWrongChainID(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	dbURL := storetest.URL(t)

	withCreds := "http://rflow:s3cret@" + node.URL[len("http://"):] + "/?key=apikey123"
	p := startRflow(t, dbURL, writeChainProject(t, 1, withCreds), "")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("rflow start kept running with a wrong chain_id; output:\n%s", p.out)
	}
	out := p.out.String()
	require.Equal(t, 1, p.cmd.ProcessState.ExitCode(), "output:\n%s", out)
	require.Regexp(t, `network local: rflow\.yaml says chain_id 1, but the node at http://rflow:xxxxx@`+
		regexp.QuoteMeta(node.URL[len("http://"):])+`\S* reports chain id 31337: set chain_id: 31337 for network local`, out)
	require.NotContains(t, out, "s3cret")
	require.NotContains(t, out, "apikey123")
	require.NotContains(t, out, "goroutine")
	// The check runs before anything is deployed: the database holds no
	// workflow, and the listing says so.
	var deployed int
	require.NoError(t, openPool(t, dbURL).QueryRow(context.Background(), `SELECT count(*) FROM rflow.workflows`).Scan(&deployed))
	require.Zero(t, deployed, "a wrong chain_id deployed workflows; output:\n%s", out)
	ls, stderr, code := rflowCmd(t, "--database-url", dbURL, "workflows", "ls", "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `[]`, ls)

	// The right chain id on a node that is down: it keeps running.
	down := fmt.Sprintf("http://127.0.0.1:%d", freePortCLI(t))
	p = startRflow(t, dbURL, writeChainProject(t, anviltest.ChainID, down), "")
	select {
	case <-p.done:
		t.Fatalf("rflow start exited while its node was only down; output:\n%s", p.out)
	case <-time.After(5 * time.Second):
	}
	require.Contains(t, p.out.String(), "RPC URL does not answer at start")
	p.stop(t)
}

// A contract address with no code (nothing deployed there, or the wrong
// network) is a warning at start naming the contract, address and
// network: its events would otherwise never arrive, silently. (With the
// contract deployed there is none: TestStartFailsOverFromDeadWebSocketRPC.)
func TestStartWarnsOfContractWithoutCode(t *testing.T) {
	t.Parallel()
	const warning = "contract has no code on its network"
	node := anviltest.Start(t, anviltest.Options{})
	p := startRflow(t, storetest.URL(t), writeChainProject(t, anviltest.ChainID, node.URL), "")
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), warning) }, 30*time.Second, 50*time.Millisecond,
		"output:\n%s", p.out)
	require.Regexp(t, warning+`.* contract=Emitter address=0x5FbDB2315678afecb367f032d93F642f64180aa3 network=local chain_id=31337`, p.out.String())
	p.stop(t)
}

// freePortCLI returns a loopback port nothing listens on.
func freePortCLI(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// A dead WebSocket first in a network's rpc: list does not stop `rflow
// start`: it warns naming the URL (credentials masked) and ingests through
// the next URL.
func TestStartFailsOverFromDeadWebSocketRPC(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	dbURL := storetest.URL(t)
	dead := fmt.Sprintf("ws://rflow:s3cret@127.0.0.1:%d", freePortCLI(t))
	p := startRflow(t, dbURL, writeChainProjectRPC(t, anviltest.ChainID, fmt.Sprintf("[%q, %q]", dead, node.URL)), "")
	pool := openPool(t, dbURL)
	// A trigger starts at the head it first sees: deposit until one is
	// after that.
	require.Eventually(t, func() bool {
		em.Deposit(7)
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM rflow.workflow_runs
			WHERE workflow_name = 'on-deposit' AND status = 'completed'`).Scan(&n))
		return n > 0
	}, 60*time.Second, 500*time.Millisecond, "the deposit's run; output:\n%s", p.out)
	out := p.out.String()
	require.Contains(t, out, "RPC URL does not answer")
	require.Contains(t, out, "ws://rflow:xxxxx@127.0.0.1:")
	require.NotContains(t, out, "s3cret")
	require.NotContains(t, out, "contract has no code", "the Emitter is deployed")
	p.stop(t)
}
