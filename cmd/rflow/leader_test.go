package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestKilledLeaderHandsOverAtOnce: River schedules the jobs that came due
// (a delay's wake-up) only on its leader. When the leader is killed, the
// next process takes the lead as soon as it finds the leader dead, not when
// the dead leader's term runs out (10–15 s later), and the parked run wakes
// and runs its step once.
func TestKilledLeaderHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSink(t)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
name: leader
workflows:
  - name: nap
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 4s }
      - { id: after, http_call: { method: POST, url: "%s/after" } }
`, s.URL)), 0o644))
	leader := func() string {
		var id string
		_ = pool.QueryRow(ctx, `SELECT leader_id FROM river.river_leader`).Scan(&id)
		return id
	}

	first := startRflow(t, dbURL, config, "")
	require.Eventually(t, func() bool { return leader() != "" }, 30*time.Second, 50*time.Millisecond, "the first process leads")
	dead := leader()
	enqueueWorkflowRuns(t, pool, config, "nap", "n", 1)
	runs := waitRunStatus(t, pool, store.RunWaitingDelay)
	first.kill()

	start := time.Now()
	second := startRflow(t, dbURL, config, "")
	require.Eventually(t, func() bool {
		id := leader()
		return id != "" && id != dead
	}, 8*time.Second, 50*time.Millisecond, "the dead leader's term should end with it, not at its TTL")
	t.Logf("the second process leads %s after it started", time.Since(start).Round(time.Millisecond))

	require.Eventually(t, func() bool {
		r, err := store.GetRun(ctx, pool, runs[0].ID, false)
		return err == nil && r.Status == store.RunCompleted
	}, 30*time.Second, 50*time.Millisecond, "the parked run wakes and completes")
	require.Equal(t, 1, s.counts()[runs[0].ID.String()+":after"], "the step after the delay ran once")
	second.stop(t)
}

// waitRunStatus waits until every run has status and returns them.
func waitRunStatus(t *testing.T, pool *pgxpool.Pool, status store.RunStatus) []*store.Run {
	t.Helper()
	var runs []*store.Run
	require.Eventually(t, func() bool {
		all, err := store.ListRuns(context.Background(), pool, store.RunFilter{Limit: 100})
		if err != nil || len(all) == 0 {
			return false
		}
		for _, r := range all {
			if r.Status != status {
				return false
			}
		}
		runs = all
		return true
	}, 30*time.Second, 50*time.Millisecond, "runs never reached %s", status)
	return runs
}
