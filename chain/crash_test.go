package chain_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// childEnv makes the test binary run one ingester process (childMain)
// instead of the tests; the parent kills it with SIGKILL.
const childEnv = "RFLOW_CHAIN_CHILD"

// childMain is an rflow-like ingester process: a Service with one event
// trigger (run_on: both) over the Emitter's Deposit logs.
func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, err := pgxpool.New(ctx, os.Getenv("RFLOW_CHILD_DB"))
	if err != nil {
		log.Error("connect", "err", err)
		return 1
	}
	defer pool.Close()
	abiJSON, err := os.ReadFile(os.Getenv("RFLOW_CHILD_ABI"))
	if err != nil {
		log.Error("read abi", "err", err)
		return 1
	}
	ev, err := chain.ParseEvent(abiJSON, "Deposit")
	if err != nil {
		log.Error("abi", "err", err)
		return 1
	}
	net := network(os.Getenv("RFLOW_CHILD_RPC"))
	net.MaxBlockRange = 3
	net.Confirmations = 2
	cfg := chain.Config{Owner: os.Getenv("RFLOW_CHILD_OWNER"), LeaseTTL: 2 * time.Second,
		Networks: []chain.Network{net},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: ev, RunOn: chain.RunOnBoth,
			Addresses: []common.Address{common.HexToAddress(os.Getenv("RFLOW_CHILD_ADDR"))}}}}
	svc, err := chain.NewService(ctx, pool, gateClaimer{}, cfg, log)
	if err != nil {
		log.Error("service", "err", err)
		return 1
	}
	defer svc.Close()
	if err := svc.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

func startChild(t *testing.T, owner, dbURL, rpc string, addr common.Address) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "RFLOW_CHILD_DB="+dbURL, "RFLOW_CHILD_RPC="+rpc,
		"RFLOW_CHILD_ADDR="+addr.Hex(), "RFLOW_CHILD_OWNER="+owner,
		"RFLOW_CHILD_ABI="+anviltest.ContractPath(t, "Emitter.abi.json"))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// Thousands of logs over many small ranges, claimed once per phase even
// though the first ingester is SIGKILLed mid-way and two ingesters then
// race for the work.
func TestKillRestartTwoIngesters(t *testing.T) {
	t.Parallel()
	const perTx, txs = 500, 8
	ctx := context.Background()
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addWorkflows(t, pool, "wf")

	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	for i := 0; i < txs; i++ {
		e.EmitMany(perTx, int64(i*perTx))
		node.Mine(2) // spread the logs over more ranges
	}
	node.Mine(3)
	const total = perTx * txs
	phase := func(p string) int {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key LIKE '%:'||$1`, p)
	}

	first := startChild(t, "first", dbURL, node.URL, e.Address)
	eventually(t, 60*time.Second, "the first ingester to claim some runs", func() bool { return phase("head") > 0 })
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	killedAt := phase("head") + phase("confirmed")
	t.Logf("killed the first ingester after %d claims", killedAt)

	startChild(t, "second", dbURL, node.URL, e.Address)
	startChild(t, "third", dbURL, node.URL, e.Address)
	eventually(t, 120*time.Second, "every log claimed in both phases", func() bool {
		return phase("head") == total && phase("confirmed") == total
	})
	require.Less(t, killedAt, 2*total, "the kill must land mid-ingestion")
	// Every amount (0 … total-1) has exactly one run per phase.
	require.Equal(t, total, count(t, pool, `
		SELECT count(DISTINCT (trigger->'event'->>'amount')::numeric) FROM rflow.workflow_runs
		WHERE trigger->>'phase' = 'confirmed'`))
	require.Equal(t, fmt.Sprint(total-1), fmt.Sprint(count(t, pool, `
		SELECT max((trigger->'event'->>'amount')::numeric)::int FROM rflow.workflow_runs`)))
	// Cursors rest at the ranges' end: head at the tip, confirmed 2 below.
	head := int64(node.BlockNumber())
	eventually(t, 30*time.Second, "cursors at the tip", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.cursors WHERE task = 'event/wf' AND
			((phase = 'head' AND block = $1) OR (phase = 'confirmed' AND block = $1 - 2))`, head) == 2
	})
}
