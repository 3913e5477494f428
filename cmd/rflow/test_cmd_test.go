package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// The scaffold's tests pass, on a database and in seconds, and leave no
// row behind.
func TestScaffoldTestPasses(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)
	out, stderr, code := rflowCmd(t, "--database-url", db, "test", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- PASS: a large deposit is recorded and alerts (")
	require.Contains(t, out, "--- PASS: the where condition drops an empty deposit (")
	require.True(t, strings.HasSuffix(out, "3 passed, 0 failed\n"), out)
}

// A wrong expectation fails its test with a diff and exit code 1; the
// other tests still pass, and -run selects.
func TestWrongExpectationFails(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)
	fixture := filepath.Join(dir, "tests", "deposits.test.yaml")
	src, err := os.ReadFile(fixture)
	require.NoError(t, err)
	wrong := strings.Replace(string(src), `amount: "2000000000000000000" }`, `amount: "3000000000000000000" }`, 1)
	require.NotEqual(t, string(src), wrong)
	require.NoError(t, os.WriteFile(fixture, []byte(wrong), 0o644))

	out, stderr, code := rflowCmd(t, "--database-url", db, "test", dir)
	t.Log(out)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- FAIL: a large deposit is recorded and alerts (")
	require.Contains(t, out, "--- PASS: a small deposit is recorded without an alert (")
	require.Contains(t, out, `requests[0].body.amount: want "3000000000000000000", got "2000000000000000000"`)
	require.Contains(t, out, "tests/deposits.test.yaml:23:81: requests[0]") // the amount's place in the fixture
	require.Contains(t, out, "-     \"amount\": \"3000000000000000000\",\n        +     \"amount\": \"2000000000000000000\",")
	require.True(t, strings.HasSuffix(out, "2 passed, 1 failed\n"), out)

	out, _, code = rflowCmd(t, "--database-url", db, "test", "-run", "small", dir)
	require.Equal(t, 0, code, out)
	require.Equal(t, "1 passed, 0 failed\n", out[strings.Index(out, "\n")+1:])
}

// rflowRows counts the rows of every table rflow and River keep, by table.
func rflowRows(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_tables
		WHERE schemaname IN ('rflow', 'relayer', 'indexer', 'river') ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out := map[string]int64{}
	for _, tb := range tables {
		q := `SELECT count(*) FROM ` + tb
		if tb == "river.river_job" {
			// The live process's own maintenance (the ledger cleanup it
			// schedules on the leader) may add a job meanwhile; every step
			// job is counted.
			q += ` WHERE kind IN ('rflow.step', 'rflow.step.first')`
		}
		var n int64
		require.NoError(t, pool.QueryRow(ctx, q).Scan(&n))
		out[tb] = n
	}
	return out
}

// liveHistory is every run of the live workflow, as its operator sees it.
func liveHistory(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT r.id || ' ' || r.status || ' ' || r.attempt || ' ' || r.updated_at || ' ' ||
			(SELECT string_agg(s.step_key || '=' || s.status || '@' || s.attempt, ',' ORDER BY s.step_key)
			   FROM rflow.step_runs s WHERE s.run_id = r.id)
		FROM rflow.workflow_runs r WHERE workflow_name = 'pipeline' ORDER BY r.id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// Workflow tests run beside a live `rflow start` on the same database: the
// live workflow's history is untouched, no live process executes a test
// run (the live engine would call the real endpoint; it is never called
// while the tests run), and no row or schema is left behind.
func TestTestsBesideLiveProcess(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newSink(t)
	config := writeProject(t, "manual: {}", s.URL)
	dir := filepath.Dir(config)

	live := startRflow(t, db, config, "")
	enqueueManual(t, pool, config, 3)
	waitAllDone(t, pool, 3, 30*time.Second)
	before, history, calls := rflowRows(t, pool), liveHistory(t, pool), s.counts()
	require.Len(t, history, 3)

	var fixture strings.Builder
	fmt.Fprintf(&fixture, "workflow: pipeline\ntests:\n")
	for i := range 6 {
		fmt.Fprintf(&fixture, `  - name: pipeline %d
    given: [ { manual: { input: { n: %d } } }, { manual: { input: { n: %d } } } ]
    http:
      - { url: "%[4]s/a", body: { items: [%[2]d] } }
      - { url: "%[4]s/ping" }
      - { url: "%[4]s/b" }
    expect:
      runs:
        - { status: completed, steps: { ran: [a, each, "ping[0]", b] } }
        - { status: completed }
      requests:
        - { method: POST, url: "%[4]s/a" }
        - { url: "%[4]s/ping", body: { item: %[2]d } }
        - { url: "%[4]s/b" }
        - { url: "%[4]s/a" }
        - { url: "%[4]s/ping" }
        - { url: "%[4]s/b" }
`, i, i, i, s.URL)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "pipeline.test.yaml"), []byte(fixture.String()), 0o644))

	out, stderr, code := rflowCmd(t, "--database-url", db, "test", "-c", config, dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.True(t, strings.HasSuffix(out, "6 passed, 0 failed\n"), out)

	require.Equal(t, calls, s.counts(), "a live process executed a test run's step")
	require.Equal(t, history, liveHistory(t, pool), "the live workflow's history changed")
	require.Equal(t, before, rflowRows(t, pool), "rows were left behind or live rows changed")
	var schemas int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'rehearsal\_%'`).Scan(&schemas))
	require.Zero(t, schemas, "a rehearsal's River schema was left behind")

	// The live process still works its own workflow afterwards.
	enqueueManualKeys(t, pool, config, "after", 1)
	waitAllDone(t, pool, 4, 30*time.Second)
	live.stop(t)
}

// A bad fixture is reported at file:line:col, nothing runs, and the exit
// code is 1; -o json gives the results as data.
func TestBadFixtureAndJSON(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)

	out, stderr, code := rflowCmd(t, "--database-url", db, "test", "-o", "json", "-run", "large", dir)
	require.Equal(t, 0, code, stderr)
	var res struct {
		Tests []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"tests"`
		Passed, Failed int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, 1, res.Passed)
	require.Zero(t, res.Failed)
	require.Equal(t, "a large deposit is recorded and alerts", res.Tests[0].Name)

	bad := filepath.Join(dir, "tests", "bad.test.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("workflow: on-deposit\ntests:\n  - name: x\n    given: { evnt: {} }\n    expect: { runs: 1 }\n"), 0o644))
	out, stderr, code = rflowCmd(t, "--database-url", db, "test", dir)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, stderr, bad+`:4:14: unknown key "evnt" in occurrence`)
	require.Contains(t, stderr, "the test fixtures are not valid (1 problem(s))")
	require.NotContains(t, out, "PASS")
}

// examples/saga's tests wait a minute for a claim that never comes, on
// their own clock: the whole run takes seconds, and advance: decides
// exactly when the reminder goes.
func TestSagaExampleTestsSkipTime(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	started := time.Now()
	out, stderr, code := rflowCmd(t, "--database-url", db, "test", "../../examples/saga")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- PASS: an unclaimed deposit gets a reminder (")
	require.Contains(t, out, "--- PASS: 59 seconds in, it still waits for the claim (")
	require.Contains(t, out, "--- PASS: a minute in, it reminds (")
	require.True(t, strings.HasSuffix(out, "3 passed, 0 failed\n"), out)
	require.Less(t, time.Since(started), 30*time.Second, "the tests waited for real")
}
