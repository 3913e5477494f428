package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const replayProject = `
name: live
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %q }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q, start_block: 0 }
workflows:
  - name: deposits
    trigger: { event: { contract: Vault, event: Deposit, run_on: head } }
    steps:
      - { id: tell, http_call: { method: POST, url: "%s/deposit/${{ event.amount }}", timeout: 60s } }
      - { id: pay, send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}" } }
`

// replaySink records each request's path and X-Rflow-Replay header; it
// holds rehearsal requests while hold is set.
type replaySink struct {
	*httptest.Server
	mu   sync.Mutex
	live map[string]int
	rehe map[string]int // by session
	hold chan struct{}
}

func newReplaySink(t *testing.T) *replaySink {
	s := &replaySink{live: map[string]int{}, rehe: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		session, hold := r.Header.Get("X-Rflow-Replay"), s.hold
		if session == "" {
			s.live[r.URL.Path]++
		} else {
			s.rehe[session]++
		}
		s.mu.Unlock()
		if session != "" && hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *replaySink) counts() (live int, rehearsal map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.live {
		live += n
	}
	out := map[string]int{}
	for k, v := range s.rehe {
		out[k] = v
	}
	return live, out
}

type replayFixture struct {
	node   *anviltest.Node
	em     *anviltest.Emitter
	sink   *replaySink
	config string
	dbURL  string
	pool   *pgxpool.Pool
	live   *proc
}

// newReplayFixture: a live `rflow start` working the deposits workflow
// on a real anvil, after deposits of 1..n have been run by it.
func newReplayFixture(t *testing.T, n int) *replayFixture {
	t.Helper()
	f := &replayFixture{node: anviltest.Start(t, anviltest.Options{})}
	f.em = anviltest.DeployEmitter(t, f.node)
	f.sink = newReplaySink(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), anviltest.EmitterABIJSON(t), 0o644))
	f.config = filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(f.config, []byte(fmt.Sprintf(replayProject, f.node.URL, "0x"+anviltest.DevKeys[4],
		f.em.Address.Hex(), f.sink.URL)), 0o644))
	f.dbURL = storetest.URL(t)
	f.pool = openPool(t, f.dbURL)
	f.live = startRflow(t, f.dbURL, f.config, "")
	for i := 1; i <= n; i++ {
		f.em.Deposit(int64(i))
	}
	f.waitLive(t, n)
	return f
}

// waitLive waits until the live workflow has n completed runs.
func (f *replayFixture) waitLive(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return countRows(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'deposits' AND status = 'completed'`) == n
	}, 60*time.Second, 50*time.Millisecond, "live output:\n%s", f.live.out)
}

// liveState is every live row a rehearsal could disturb, as text.
func (f *replayFixture) liveState(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, f.pool.QueryRow(context.Background(), `
		SELECT concat_ws(E'\n',
		  (SELECT string_agg(concat_ws(' ', id, status, attempt, trigger_key, updated_at), E'\n' ORDER BY id)
		     FROM rflow.workflow_runs WHERE workflow_name = 'deposits'),
		  (SELECT string_agg(concat_ws(' ', s.run_id, s.step_key, s.status, s.attempt, s.output::text), E'\n' ORDER BY s.run_id, s.step_key)
		     FROM rflow.step_runs s JOIN rflow.workflow_runs r ON r.id = s.run_id WHERE r.workflow_name = 'deposits'),
		  (SELECT string_agg(concat_ws(' ', external_id, status, nonce, tx_hash), E'\n' ORDER BY external_id)
		     FROM relayer.transactions WHERE NOT dry_run),
		  (SELECT string_agg(concat_ws(' ', name, generation, spec_hash, paused), E'\n' ORDER BY name) FROM rflow.workflows
		     WHERE name = 'deposits'))`).Scan(&s))
	return s
}

func (f *replayFixture) nonce(t *testing.T) uint64 {
	t.Helper()
	_, addr := anviltest.Key(t, 4)
	n, err := f.node.Client().NonceAt(context.Background(), addr, nil)
	require.NoError(t, err)
	return n
}

func countRows(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// TestReplayBesideLiveStart runs `rflow replay --dry-run` (the real
// binary) over the blocks a live `rflow start` has already worked, while
// it keeps working: the rehearsal re-runs every deposit under
// replay_<session>__deposits (its http_call marked with X-Rflow-Replay),
// simulates its sends without moving the wallet's nonce, leaves every
// live row as it was, is executed by no live process, is hidden from
// `runs list` unless asked for, and `replay prune` removes exactly its
// rows.
func TestReplayBesideLiveStart(t *testing.T) {
	t.Parallel()
	const n = 4
	f := newReplayFixture(t, n)
	before, nonce := f.liveState(t), f.nonce(t)
	require.EqualValues(t, n, nonce, "the live sends went out")
	liveHits, _ := f.sink.counts()
	head := f.node.BlockNumber()

	out, errOut, code := rflowCmd(t, "--database-url", f.dbURL, "replay", "-c", f.config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", fmt.Sprint(head), "--dry-run", "-o", "json")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	var sum replaySummary
	require.NoError(t, json.Unmarshal([]byte(out), &sum), out)
	require.True(t, strings.HasPrefix(errOut, "replay session "+sum.Session+": deposits as replay_"+sum.Session+"__deposits"), errOut)
	require.Contains(t, errOut, "replay: blocks ", "plain progress lines off a terminal")
	rehearsal := "replay_" + sum.Session + "__deposits"
	require.Equal(t, rehearsal, sum.Rehearsal)
	require.EqualValues(t, n, sum.Runs)
	require.EqualValues(t, n, sum.Logs)
	require.True(t, sum.Complete)
	require.Equal(t, map[store.RunStatus]int64{store.RunCompleted: n}, sum.Statuses)

	// The rehearsal made its http calls, marked; its sends were simulated.
	live, rehe := f.sink.counts()
	require.Equal(t, liveHits, live, "no live request from the replay")
	require.Equal(t, n, rehe[sum.Session])
	require.Equal(t, nonce, f.nonce(t), "a dry-run replay moves no nonce")
	require.Equal(t, n, countRows(t, f.pool, `SELECT count(*) FROM rflow.step_runs s JOIN rflow.workflow_runs r ON r.id = s.run_id
		WHERE r.workflow_name = $1 AND s.step_id = 'pay' AND s.status = 'completed' AND s.output->>'status' = 'simulated'`, rehearsal))
	require.Equal(t, n, countRows(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1 AND trigger_key LIKE $2`,
		rehearsal, "replay:"+sum.Session+":31337:0x%"), "prefixed trigger keys")

	// Live state untouched, and no live process executed a rehearsal job.
	require.Equal(t, before, f.liveState(t))
	queue := "replay_" + sum.Session
	require.GreaterOrEqual(t, countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1`, queue), 2*n)
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM river.river_job j JOIN rflow.workflow_runs r ON coalesce(j.args->>'run_id', j.args->>0) = r.id::text
		WHERE r.workflow_name = $1 AND j.queue <> $2`, rehearsal, queue), "every rehearsal step job is in its queue")
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1 AND array_to_string(attempted_by, ',') LIKE $2`,
		queue, fmt.Sprintf("%%-%d-%%", f.live.cmd.Process.Pid)), "the live process worked a rehearsal job")

	// The live process keeps working, and never claims for the rehearsal.
	f.em.Deposit(100)
	f.waitLive(t, n+1)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, n, countRows(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, rehearsal))

	// runs list hides rehearsals unless named (or --rehearsals).
	out, errOut, code = rflowCmd(t, "--database-url", f.dbURL, "runs", "list", "-o", "json", "--limit", "100")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, rehearsal)
	require.Equal(t, n+1, strings.Count(out, `"deposits"`), out)
	out, errOut, code = rflowCmd(t, "--database-url", f.dbURL, "runs", "list", "-o", "json", "--workflow", rehearsal)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, n, strings.Count(out, `"`+rehearsal+`"`), out)
	out, _, _ = rflowCmd(t, "--database-url", f.dbURL, "runs", "list", "--rehearsals", "--limit", "100")
	require.Equal(t, n, strings.Count(out, rehearsal), out)
	out, _, _ = rflowCmd(t, "--database-url", f.dbURL, "workflows", "ls")
	require.NotContains(t, out, rehearsal)

	// Prune removes the session's rows only.
	after := f.liveState(t)
	out, errOut, code = rflowCmd(t, "--database-url", f.dbURL, "replay", "prune", "--session", sum.Session, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var pr replayPruneResult
	require.NoError(t, json.Unmarshal([]byte(out), &pr), out)
	require.EqualValues(t, n, pr.Runs)
	require.EqualValues(t, n, pr.Sends, "the simulated relayer rows")
	require.EqualValues(t, 1, pr.Workflows)
	require.Zero(t, pr.Busy)
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, rehearsal))
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1`, queue))
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM rflow.workflows WHERE name = $1`, rehearsal))
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM relayer.transactions WHERE dry_run`))
	require.Equal(t, after, f.liveState(t), "prune touched a live row")

	// On a terminal (script(1) gives it one) the progress is a bar.
	if script, err := exec.LookPath("script"); err == nil {
		cmd := exec.Command(script, "-qec", strings.Join([]string{rflowBin, "--database-url", f.dbURL, "replay", "-c", f.config,
			"--workflow", "deposits", "--from-block", "0", "--to-block", fmt.Sprint(head), "--dry-run", "--session", "tty"}, " "), "/dev/null")
		cmd.Env = append(os.Environ(), "TERM=xterm")
		tty, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", tty)
		require.Contains(t, string(tty), "logs 4, runs 4")
		require.Contains(t, string(tty), "100%")
		// A replay this small ends at once: no rate of millions a second.
		require.NotRegexp(t, `\d{5,}(\.\d+)? (blocks|runs|it)/s`, string(tty))
		require.NotContains(t, string(tty), "replay: blocks ", "no plain lines on a terminal")
		require.Contains(t, string(tty), "replay tty done: ")
	}

	// --skip-http journals the http_call as skipped and requests nothing.
	out, errOut, code = rflowCmd(t, "--database-url", f.dbURL, "replay", "-c", f.config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", fmt.Sprint(head), "--dry-run", "--skip-http", "--session", "skip", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &sum), out)
	require.Equal(t, map[store.RunStatus]int64{store.RunCompleted: n}, sum.Statuses)
	_, rehe = f.sink.counts()
	require.Zero(t, rehe["skip"], "--skip-http made a request")
	require.Equal(t, n, countRows(t, f.pool, `SELECT count(*) FROM rflow.step_runs s JOIN rflow.workflow_runs r ON r.id = s.run_id
		WHERE r.workflow_name = 'replay_skip__deposits' AND s.step_id = 'tell' AND (s.output->>'skipped')::boolean`))
	f.live.stop(t)
}

// TestKilledReplayLeavesNoWorkForLive kills a replay (kill -9) while its
// http_call steps are in flight: the live process rescues the dead
// process's jobs into the rehearsal's own queue, never executes them (no
// further rehearsal request arrives, no job is attempted by it), and
// `replay prune` then removes every row the session left.
func TestKilledReplayLeavesNoWorkForLive(t *testing.T) {
	t.Parallel()
	const n = 3
	f := newReplayFixture(t, n)
	before := f.liveState(t)
	f.sink.mu.Lock()
	f.sink.hold = make(chan struct{})
	f.sink.mu.Unlock()
	t.Cleanup(func() { close(f.sink.hold) })

	rp := startRflowArgs(t, nil, "--database-url", f.dbURL, "replay", "-c", f.config, "--workflow", "deposits",
		"--from-block", "0", "--to-block", fmt.Sprint(f.node.BlockNumber()), "--session", "killed")
	require.Eventually(t, func() bool { _, r := f.sink.counts(); return r["killed"] == n }, 60*time.Second, 50*time.Millisecond,
		"replay output:\n%s", rp.out)
	require.True(t, strings.HasPrefix(rp.out.String(), "replay session killed: "), rp.out.String())
	rp.kill()

	queue, rehearsal := "replay_killed", "replay_killed__deposits"
	// The live process judges the replay dead and rescues its jobs, which
	// then wait, available, in the rehearsal's queue: nobody works it.
	require.Eventually(t, func() bool {
		return countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1 AND state = 'available'`, queue) == n
	}, 30*time.Second, 100*time.Millisecond)
	time.Sleep(3 * time.Second)
	_, rehe := f.sink.counts()
	require.Equal(t, n, rehe["killed"], "a live process executed a rehearsal step")
	require.Equal(t, n, countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1 AND state = 'available'`, queue))
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1 AND array_to_string(attempted_by, ',') LIKE $2`,
		queue, fmt.Sprintf("%%-%d-%%", f.live.cmd.Process.Pid)))
	require.Equal(t, n, countRows(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1 AND status <> 'completed'`, rehearsal))
	require.Equal(t, before, f.liveState(t))

	out, errOut, code := rflowCmd(t, "--database-url", f.dbURL, "replay", "prune", "--all")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("pruned every rehearsal (replays, killed tests): %d run(s), %d job(s)", n, n))
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, rehearsal))
	require.Zero(t, countRows(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1`, queue))
	require.Equal(t, before, f.liveState(t), "prune touched a live row")
	f.live.stop(t)
}

// TestReplayUsageErrors: mistakes are usage errors naming what to fix,
// before any session is announced.
func TestReplayUsageErrors(t *testing.T) {
	t.Parallel()
	config := writeProject(t, "manual: {}", "http://127.0.0.1:1")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-c", config, "--from-block", "0", "--to-block", "1"}, "--workflow is required"},
		{[]string{"replay", "-c", config, "--workflow", "pipeline"}, "--from-block and --to-block are required"},
		{[]string{"replay", "-c", config, "--workflow", "pipeline", "--from-block", "5", "--to-block", "1"}, "want 0 <= from-block <= to-block"},
		{[]string{"replay", "-c", config, "--workflow", "nope", "--from-block", "0", "--to-block", "1"}, "no such workflow"},
		{[]string{"replay", "-c", config, "--workflow", "pipeline", "--from-block", "0", "--to-block", "1"}, "has a manual trigger"},
		{[]string{"replay", "-c", config, "--workflow", "pipeline", "--from-block", "0", "--to-block", "1", "--session", "Bad_Id"}, "--session"},
		{[]string{"replay", "prune"}, "--session S"},
		{[]string{"replay", "prune", "--session", "a", "--all"}, "exclude each other"},
	} {
		out, errOut, code := rflowCmd(t, c.args...)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.want, c.args)
		// A replay that cannot start announces no session to prune.
		require.NotContains(t, out+errOut, "replay session", c.args)
	}
}
