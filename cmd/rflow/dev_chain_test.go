package main

import (
	"context"
	"math/big"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
)

// A `rflow dev` session on the simulated chain (chain id 1337), then one on
// anvil (31337) with the same data directory: the first session's event
// cursor (well past the new chain's first blocks) is of another chain, so
// the second session claims every Deposit of the new chain from its start
// block (issue 19, item 7: it used to lose the deposits below the old
// cursor). The second session retires the simulated chain, cursor and all.
func TestDevOnAnotherChainKeepsNoOldCursor(t *testing.T) {
	t.Parallel()
	anvil, err := anviltest.Binary()
	if err != nil {
		t.Skip(err)
	}
	dataHome := publicTempDir(t)
	start := func(backend, every string) (*exec.Cmd, *syncBuffer, []string, []string) {
		var stdout, stderr syncBuffer
		cmd := exec.Command(rflowBin, "dev", "--http", "127.0.0.1:0", "--emit-every", every, "--chain", backend)
		cmd.Dir = dataHome
		cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME", "RFLOW_ANVIL"),
			"XDG_DATA_HOME="+dataHome, "RFLOW_ANVIL="+anvil)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("rflow dev --chain %s stdout:\n%s\nstderr:\n%s", backend, stdout.String(), stderr.String())
			}
		})
		var dbURL, ch []string
		require.Eventually(t, func() bool {
			out := stdout.String()
			dbURL, ch = bannerDatabase.FindStringSubmatch(out), bannerChain.FindStringSubmatch(out)
			return dbURL != nil && ch != nil
		}, 90*time.Second, 100*time.Millisecond, "no banner from rflow dev --chain %s", backend)
		return cmd, &stdout, dbURL, ch
	}
	ctx := context.Background()
	runsOn := func(dbURL string, chainID int64) int {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return -1
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE chain_id = $1`, chainID).Scan(&n); err != nil {
			return -1
		}
		return n
	}

	// Session 1: the simulated chain, emitting fast so its cursor runs ahead.
	cmd, _, firstDB, first := start("simulated", "100ms")
	require.Equal(t, "1337", first[3])
	require.Eventually(t, func() bool { return runsOn(firstDB[1], 1337) >= 30 }, 60*time.Second, 200*time.Millisecond,
		"the simulated session claimed no 30 deposits")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())

	// Session 2: anvil, same data directory.
	_, stdout, dbURL, ch := start("anvil", "300ms")
	require.Equal(t, "31337", ch[3])
	rpc, err := ethclient.Dial(ch[4])
	require.NoError(t, err)
	defer rpc.Close()
	topic := anviltest.EmitterABI(t).Events["Deposit"].ID
	var missing []string
	logCount := 0
	claimed := func() bool {
		head, err := rpc.BlockNumber(ctx)
		if err != nil || head < 15 {
			return false
		}
		logs, err := rpc.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: big.NewInt(0), ToBlock: new(big.Int).SetUint64(head - 2),
			Topics: [][]common.Hash{{topic}}})
		if err != nil {
			return false
		}
		keys := make([]string, len(logs))
		for i, l := range logs {
			r, err := rpc.TransactionReceipt(ctx, l.TxHash)
			if err != nil {
				return false
			}
			keys[i] = chain.EventKey(31337, l.TxHash, l.Index-r.Logs[0].Index, chain.PhaseConfirmed, false)
		}
		conn, err := pgx.Connect(ctx, dbURL[1])
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT k FROM unnest($1::text[]) AS k
			WHERE NOT EXISTS (SELECT 1 FROM rflow.workflow_runs WHERE workflow_name = 'on-deposit' AND trigger_key = k)`, keys)
		if err != nil {
			return false
		}
		missing, err = pgx.CollectRows(rows, pgx.RowTo[string])
		logCount = len(logs)
		return err == nil && len(logs) >= 10 && len(missing) == 0
	}
	for deadline := time.Now().Add(60 * time.Second); !claimed() && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
	}
	require.GreaterOrEqual(t, logCount, 10, "the anvil chain emitted too few deposits")
	require.Empty(t, missing, "deposits of the anvil chain (of %d) without a run", logCount)
	// The simulated chain was retired, its cursor with it (no warning about
	// a cursor of another chain is left to give), and that is said.
	require.Regexp(t, newDevChainLine, stdout.String(), "the retired chain is said")
}
