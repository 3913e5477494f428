package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// The session's one run waits for an event no fixture gives and no
// timeout ends: on rflow test's clock, which skips every deadline, it is
// what keeps the session running until --timeout.
const slowTestProject = `
name: slow
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1" }
contracts:
  - { name: Emitter, abi: ./Emitter.abi.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: wait
    trigger: { manual: {} }
    steps:
      - id: pause
        wait_for: { event: { contract: Emitter, event: Claimed } }
`

const slowTestFixture = `workflow: wait
tests:
  - name: waits
    given: [ { manual: {} } ]
    expect: { runs: 1 }
`

// An `rflow test` killed with -9 mid-session leaves its namespaced rows
// and its River schema; `rflow replay prune --all` leaves them alone while
// a session is running, and removes them once none is.
func TestKilledTestSessionPrunedByReplayPruneAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.URL(t)
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rflow.yaml"), []byte(slowTestProject), 0o644))
	abiJSON, err := os.ReadFile(filepath.Join("..", "..", "testdata", "contracts", "Emitter.abi.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Emitter.abi.json"), abiJSON, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "wait.test.yaml"), []byte(slowTestFixture), 0o644))

	leftovers := func() (runs, workflows, schemas int) {
		runs = countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name LIKE 'test\_%'`)
		workflows = countRows(t, pool, `SELECT count(*) FROM rflow.workflows WHERE name LIKE 'test\_%'`)
		schemas = countRows(t, pool, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'rehearsal\_%'`)
		return
	}
	p := startRflowArgs(t, nil, "--database-url", db, "test", "--timeout", "5m", dir)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name LIKE 'test\_%' AND status = 'waiting_event'`) == 1
	}, 60*time.Second, 50*time.Millisecond, "rflow test output:\n%s", p.out)

	// Running: the sweep leaves the session's rows and schema.
	out, errOut, code := rflowCmd(t, "--database-url", db, "replay", "prune", "--all")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1 run(s) are still being worked by a replay or an rflow test", out)
	runs, wfs, schemas := leftovers()
	require.Equal(t, []int{1, 1, 1}, []int{runs, wfs, schemas}, "prune touched a running test session")

	p.kill()
	runs, wfs, schemas = leftovers()
	require.Equal(t, []int{1, 1, 1}, []int{runs, wfs, schemas}, "a killed session cleans nothing up")

	out, errOut, code = rflowCmd(t, "--database-url", db, "replay", "prune", "--all", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.Contains(out, `"runs": 1`) || strings.Contains(out, `"runs":1`), out)
	runs, wfs, schemas = leftovers()
	require.Equal(t, []int{0, 0, 0}, []int{runs, wfs, schemas}, "prune --all left test leftovers")
}
