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

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const delayFirstCrashProject = `
name: crash
workflows:
  - name: napper
    trigger: { cron: { schedule: "@every 1s" } }
    steps:
      - id: nap
        delay: 1s
      - id: b
        http_call: { method: POST, url: "%s/b" }
`

// A run born parked (its first step a delay, written by the claim's
// INSERT) survives a kill -9 right after its claim commits: the third
// cron claim (the process knows the generation by then, so its run is
// born parked) is killed after commit, and after a restart every run wakes,
// makes its call once and completes, with its delay and call journaled
// once each.
func TestCrashAfterClaimOfRunBornParked(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(delayFirstCrashProject, s.URL)), 0o644))

	startRflowWorkers(t, dbURL, config, jobs.FaultAfterClaim+":3", 1).waitKilled(t, 30*time.Second)
	var born int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM rflow.workflow_runs WHERE status = 'waiting_delay' OR status = 'completed'`).Scan(&born))
	require.GreaterOrEqual(t, born, 3, "the killed process committed three claims")

	p := startRflow(t, dbURL, config, "")
	time.Sleep(2 * time.Second)
	_, err = pool.Exec(context.Background(), `UPDATE rflow.workflows SET paused = true`)
	require.NoError(t, err)
	runs := waitAllDone(t, pool, 3, 60*time.Second)
	p.stop(t)
	seen := s.counts()
	for _, r := range runs {
		steps, err := store.RunSteps(context.Background(), pool, r.ID)
		require.NoError(t, err)
		require.Len(t, steps, 2, "run %s: nap, b", r.ID)
		for _, st := range steps {
			require.Equal(t, store.StepCompleted, st.Status, "run %s step %s", r.ID, st.Key)
		}
		// One worker, and the kill lands in the cron loop: a call of an
		// earlier run may be in flight then, hence at most one repeat.
		require.GreaterOrEqual(t, seen[r.ID.String()+":b"], 1, "run %s never made its call", r.ID)
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	require.LessOrEqual(t, dups, 1, "duplicated calls beyond the at-most-once window: %v", dupKeys(seen))
}
