package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// standbyProject claims a run every second; each run calls the sink, naps
// (so runs are in flight when a process dies) and calls it again.
const standbyProject = `
name: standby
workflows:
  - name: ticker
    trigger: { cron: { schedule: "@every 1s" } }
    steps:
      - id: a
        http_call: { method: POST, url: "%[1]s/a" }
      - { id: nap, delay: 2s }
      - id: b
        http_call: { method: POST, url: "%[1]s/b" }
`

// startStandbyTest runs `rflow start` with 4 workers and extra flags.
func startStandbyTest(t *testing.T, dbURL, config string, env []string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--database-url", dbURL, "--log-level", "info", "start", "-c", config, "--workers", "4"}, extra...)
	return startRflowArgs(t, env, args...)
}

// TestStandbyTakesOver: a --standby process works nothing while the active
// process lives (no node, no job, no claim); after kill -9 of the active
// one it takes over, finishes the runs the dead process had in flight,
// and claims the new occurrences, each step once.
func TestStandbyTakesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSink(t)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(standbyProject, s.URL)), 0o644))

	a := startStandbyTest(t, dbURL, config, nil)
	var clientA string
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT client_id FROM rflow.nodes`).Scan(&clientA) == nil
	}, 30*time.Second, 50*time.Millisecond, "A never registered:\n%s", a.out)
	b := startStandbyTest(t, dbURL, config, nil, "--standby")

	// While A lives, B holds nothing and works nothing.
	time.Sleep(4 * time.Second)
	var nodes, leases int
	var workers []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.nodes`).Scan(&nodes))
	require.Equal(t, 1, nodes, "the standby registered as a live node")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.leases WHERE owner IS NOT NULL AND owner <> $1`, clientA).Scan(&leases))
	require.Zero(t, leases, "the standby holds a lease")
	rows, err := pool.Query(ctx, `SELECT DISTINCT unnest(attempted_by) FROM river.river_job`)
	require.NoError(t, err)
	workers, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{clientA}, workers, "a job was worked by someone but A")
	require.Contains(t, b.out.String(), "standby: waiting")
	before, err := store.ListRuns(ctx, pool, store.RunFilter{Limit: 1000})
	require.NoError(t, err)
	require.NotEmpty(t, before, "A claimed no tick")
	inFlight := 0
	for _, r := range before {
		if !r.Status.Terminal() {
			inFlight++
		}
	}
	require.Positive(t, inFlight, "no run was in flight when A died")

	a.kill()
	killedAt := time.Now().UTC()
	require.Eventually(t, func() bool {
		var c string
		return pool.QueryRow(ctx, `SELECT client_id FROM rflow.nodes`).Scan(&c) == nil && c != clientA
	}, 15*time.Second, 50*time.Millisecond, "the standby never took over:\n%s", b.out)

	// A's runs complete, and B claims ticks of its own.
	require.Eventually(t, func() bool {
		for _, r := range before {
			got, err := store.GetRun(ctx, pool, r.ID, false)
			require.NoError(t, err)
			if got.Status != store.RunCompleted {
				return false
			}
		}
		var fresh int
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key > $1 AND status = 'completed'`,
			killedAt.Format(time.RFC3339)).Scan(&fresh))
		return fresh >= 2
	}, 60*time.Second, 100*time.Millisecond, "the standby did not finish A's runs and new ticks:\n%s", b.out)
	b.stop(t)

	// Every step ran once: the at-most-once window is only the effects A
	// had started when it was killed (4 workers).
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Status: store.RunCompleted, Limit: 1000})
	require.NoError(t, err)
	seen := s.counts()
	dups := dupKeys(seen)
	require.LessOrEqual(t, len(dups), 4, "duplicated deliveries: %v", dups)
	for _, r := range runs {
		steps, err := store.RunSteps(ctx, pool, r.ID)
		require.NoError(t, err)
		require.Len(t, steps, 3, "run %s", r.ID)
		for _, st := range steps {
			require.Equal(t, store.StepCompleted, st.Status)
			if st.Kind == "http_call" {
				require.GreaterOrEqual(t, seen[r.ID.String()+":"+st.Key], 1, "run %s step %s never reached the sink", r.ID, st.Key)
			}
		}
	}
}

// --standby and --workers-only exclude each other.
func TestStandbyFlagsConflict(t *testing.T) {
	t.Parallel()
	_, stderr, code := rflowCmd(t, "start", "--standby", "--workers-only")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "exclude each other")
}

// A standby takes over its own project's trigger role as soon as that
// project's trigger holder dies, while a --workers-only process of the same
// project and a process of another project on the same database live on.
func TestStandbyTakesOverItsProjectBesideOthers(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	dbURL := storetest.URL(t)
	pool := openPool(t, dbURL)
	dir := t.TempDir()
	mine, other := filepath.Join(dir, "mine.yaml"), filepath.Join(dir, "other.yaml")
	require.NoError(t, os.WriteFile(mine, []byte(fmt.Sprintf(standbyProject, s.URL)), 0o644))
	require.NoError(t, os.WriteFile(other, []byte(`
name: other
workflows:
  - name: elsewhere
    trigger: { manual: {} }
    steps:
      - { id: d, delay: 1s }
`), 0o644))

	holder := startStandbyTest(t, dbURL, mine, nil)
	require.Eventually(t, func() bool { return countRows(t, pool, `SELECT count(*) FROM rflow.nodes`) == 1 },
		30*time.Second, 50*time.Millisecond, "holder:\n%s", holder.out)
	workers := startStandbyTest(t, dbURL, mine, nil, "--workers-only")
	otherProject := startStandbyTest(t, dbURL, other, nil)
	require.Eventually(t, func() bool { return countRows(t, pool, `SELECT count(*) FROM rflow.nodes`) == 3 },
		30*time.Second, 50*time.Millisecond, "workers:\n%s\nother:\n%s", workers.out, otherProject.out)
	standby := startStandbyTest(t, dbURL, mine, nil, "--standby")
	time.Sleep(3 * time.Second)
	require.Contains(t, standby.out.String(), "standby: waiting while this project's trigger holder is alive")
	require.NotContains(t, standby.out.String(), "taking over")

	holder.kill()
	killedAt := time.Now().UTC()
	require.Eventually(t, func() bool { return contains(standby.out, "taking over") }, 15*time.Second, 100*time.Millisecond,
		"the standby waited for processes that do not hold its project's triggers:\n%s", standby.out)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'ticker' AND trigger_key > $1`,
			killedAt.Format(time.RFC3339)) >= 2
	}, 30*time.Second, 100*time.Millisecond, "the standby's triggers claim ticks:\n%s", standby.out)
	workers.requireAlive(t)
	otherProject.requireAlive(t)
	standby.stop(t)
	workers.stop(t)
	otherProject.stop(t)
}

func contains(b *syncBuffer, s string) bool { return strings.Contains(b.String(), s) }
