package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/examples/quickstart"
	"github.com/rflow-dev/rflow/jobs"
)

var newDevChainLine = regexp.MustCompile(`new dev chain: the previous session's chain is gone; its (\d+) runs stay in history, (\d+) in-flight runs were ended`)

// Restarting `rflow dev` on the same data directory starts a new embedded
// dev chain: the previous one is gone by construction, which is no reorg.
// The quickstart, with an on_reorg http_call to a sink and a long delay
// that keeps the standard deposits' runs in flight, runs twice: the second
// session records no reorg and no on_reorg response, calls no sink, keeps
// the first session's completed runs completed, ends its in-flight ones
// with a clear error, says so in one line, and claims and completes the new
// chain's deposits (whose keys may repeat the old chain's). On the
// simulated chain the genesis is the same in both sessions; on anvil it
// differs.
func TestDevRestartDiscardsTheDevChain(t *testing.T) {
	t.Parallel()
	t.Run("Simulated", func(t *testing.T) {
		t.Parallel()
		testDevRestart(t, devchain.BackendSimulated, devchain.BackendSimulated)
	})
	t.Run("Anvil", func(t *testing.T) {
		t.Parallel()
		if _, err := anviltest.Binary(); err != nil {
			t.Skip(err)
		}
		testDevRestart(t, devchain.BackendAnvil, devchain.BackendAnvil)
	})
	// anvil installed between two sessions: the simulated chain (1337)
	// is gone as well, though the new one has another chain id (31337).
	t.Run("SimulatedThenAnvil", func(t *testing.T) {
		t.Parallel()
		if _, err := anviltest.Binary(); err != nil {
			t.Skip(err)
		}
		testDevRestart(t, devchain.BackendSimulated, devchain.BackendAnvil)
	})
}

// testDevRestart runs two rflow dev sessions on one data directory, the
// first on backend first and the second on then.
func testDevRestart(t *testing.T, first, then string) {
	var sunk atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sunk.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()

	dataHome := publicTempDir(t)
	project := filepath.Join(dataHome, "project")
	_, err := quickstart.WriteTo(project)
	require.NoError(t, err)
	wf := filepath.Join(project, "workflows", "deposits.yaml")
	b, err := os.ReadFile(wf)
	require.NoError(t, err)
	b = append(b, []byte(`
  - id: hold
    if: "${{ steps.score.output.body.tier == 'standard' }}"
    delay: 1h

on_reorg:
  - id: undo
    http_call: { method: POST, url: "`+sink.URL+`/undo", body: { run: "${{ run.id }}" } }
`)...)
	require.NoError(t, os.WriteFile(wf, b, 0o644))

	ctx := context.Background()
	start := func(backend string) (*exec.Cmd, *syncBuffer, *syncBuffer, string) {
		var stdout, stderr syncBuffer
		cmd := exec.Command(rflowBin, "dev", "--http", "127.0.0.1:0", "--emit-every", "500ms", "--chain", backend,
			"--project", project)
		cmd.Dir = dataHome
		cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME", "RFLOW_ANVIL"), "XDG_DATA_HOME="+dataHome)
		if anvil, err := anviltest.Binary(); err == nil {
			cmd.Env = append(cmd.Env, "RFLOW_ANVIL="+anvil)
		}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("rflow dev stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
		var dbURL []string
		require.Eventually(t, func() bool {
			dbURL = bannerDatabase.FindStringSubmatch(stdout.String())
			return dbURL != nil && bannerChain.MatchString(stdout.String())
		}, 90*time.Second, 100*time.Millisecond, "no banner from rflow dev")
		return cmd, &stdout, &stderr, dbURL[1]
	}
	query := func(dbURL, sql string, args ...any) int {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return -1
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	stop := func(cmd *exec.Cmd) {
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait(), "rflow dev did not exit 0")
	}

	// Session 1: runs complete (gold deposits) and stay in flight
	// (standard ones, in their delay).
	cmd, stdout, _, dbURL := start(first)
	require.NotRegexp(t, newDevChainLine, stdout.String(), "a first session discards nothing")
	require.Eventually(t, func() bool {
		return query(dbURL, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`) >= 2 &&
			query(dbURL, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'waiting_delay'`) >= 2
	}, 90*time.Second, 250*time.Millisecond, "session 1: no 2 completed and 2 delayed runs")
	stop(cmd)

	// Session 2, same data directory, a new dev chain.
	cmd, stdout, stderr, dbURL := start(then)
	var line []string
	require.Eventually(t, func() bool {
		line = newDevChainLine.FindStringSubmatch(stdout.String())
		return line != nil
	}, 30*time.Second, 100*time.Millisecond, "session 2 did not say the previous dev chain is gone")
	runs, _ := strconv.Atoi(line[1])
	ended, _ := strconv.Atoi(line[2])
	old := query(dbURL, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key LIKE '%@%'`)
	require.Equal(t, old, runs, "the line counts the previous session's runs")
	completed := query(dbURL, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key LIKE '%@%' AND status = 'completed'`)
	require.GreaterOrEqual(t, completed, 2, "the previous session's completed runs stay completed")
	require.GreaterOrEqual(t, ended, 1)
	require.Equal(t, ended, query(dbURL, `SELECT count(*) FROM rflow.workflow_runs
		WHERE trigger_key LIKE '%@%' AND status = 'cancelled' AND starts_with(error, $1)`, jobs.DiscardedRunError),
		"the in-flight runs end cancelled, saying why")
	require.Equal(t, old, completed+ended, "every run of the previous session ended, none left in flight")

	// The new chain's deposits are claimed and completed.
	require.Eventually(t, func() bool {
		return query(dbURL, `SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key NOT LIKE '%@%' AND status = 'completed'`) >= 2
	}, 90*time.Second, 250*time.Millisecond, "session 2: no 2 runs of the new chain completed")

	require.Zero(t, query(dbURL, `SELECT count(*) FROM indexer.reorgs`), "a reorg was recorded")
	require.Zero(t, query(dbURL, `SELECT count(*) FROM rflow.reorg_runs`), "an on_reorg response was started")
	require.Zero(t, query(dbURL, `SELECT count(*) FROM rflow.workflow_runs WHERE orphaned_at IS NOT NULL`), "a run was orphaned")
	require.Equal(t, old, completed+ended, "the previous session's runs are left as they ended")
	require.Equal(t, ended, query(dbURL, `SELECT count(*) FROM rflow.workflow_runs
		WHERE trigger_key LIKE '%@%' AND status = 'cancelled' AND starts_with(error, $1)`, jobs.DiscardedRunError),
		"a cancelled run's error still says why, after the new session's relayer ran")
	// The old chain's sends ended with it: no no-op was sent on the new
	// chain for a send of the old one.
	require.Zero(t, query(dbURL, `SELECT count(*) FROM relayer.broadcasts WHERE kind = 'cancel'`),
		"a cancelling no-op was broadcast on the new chain")
	require.Zero(t, query(dbURL, `SELECT count(*) FROM relayer.transactions t
		WHERE status IN ('pending', 'in_mempool', 'mined') AND EXISTS (SELECT 1 FROM rflow.workflow_runs r
		WHERE t.external_id LIKE 'rflow:' || r.id || ':%' AND r.trigger_key LIKE '%@%')`),
		"a send of the old chain is still in flight")
	stop(cmd)
	require.Zero(t, sunk.Load(), "an on_reorg http_call reached the sink")
	for _, s := range []string{"reorg", "chain replaced", "orphaned run", "level=ERROR", "nonce healed"} {
		require.NotContains(t, stderr.String(), s)
		require.NotContains(t, stdout.String(), s)
	}
}
