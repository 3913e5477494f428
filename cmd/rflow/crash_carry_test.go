package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const carryCrashProject = `
name: crash
workflows:
  - name: chain
    trigger: { manual: {} }
    steps:
      - id: a
        http_call: { method: POST, url: "%[1]s/a" }
      - id: b
        http_call: { method: POST, url: "%[1]s/b" }
      - id: c
        http_call: { method: POST, url: "%[1]s/c" }
`

// TestKillCarriedStep kills `rflow start` (kill -9, at a fault point)
// while a step carried inline by the job of the step before it is in
// flight: before its effect, after its effect and before its outcome, and
// after its outcome (the next step is carried, with no job of its own).
// With one worker the job of a run's first step carries the other two, so
// the fault point's second and third hits are the first run's carried b
// and c. After a restart every run completes; every step reached the
// endpoint exactly once, but for the one step in the window between an
// effect and its outcome; b and c were carried (no River job of their own:
// one job per run, the carrier every step names).
func TestKillCarriedStep(t *testing.T) {
	t.Parallel()
	cases := []struct {
		point  string
		window int
	}{
		{jobs.FaultAfterJournal + ":2", 0},
		{jobs.FaultAfterEffect + ":2", 1},
		{jobs.FaultAfterOutcome + ":2", 0},
		{jobs.FaultAfterEffect + ":3", 1},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.point, ":", "_"), func(t *testing.T) {
			t.Parallel()
			s := newSink(t)
			dbURL := storetest.URL(t)
			pool, err := pgxpool.New(context.Background(), dbURL)
			require.NoError(t, err)
			defer pool.Close()
			config := filepath.Join(t.TempDir(), "rflow.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(carryCrashProject, s.URL)), 0o644))
			enqueueWorkflowRuns(t, pool, config, "chain", "k", 3)

			startRflowWorkers(t, dbURL, config, tc.point, 1).waitKilled(t, 30*time.Second)
			p := startRflow(t, dbURL, config, "")
			runs := waitAllDone(t, pool, 3, 90*time.Second)
			require.Len(t, runs, 3)
			p.stop(t)
			checkCarriedOnce(t, pool, s, runs, tc.window)
		})
	}
}

// checkCarriedOnce asserts every run's three steps completed at their first
// attempt, each reached the endpoint once (at most window of them twice),
// and b and c were carried by the run's one River job.
func checkCarriedOnce(t *testing.T, pool *pgxpool.Pool, s *sink, runs []*store.Run, window int) {
	t.Helper()
	ctx := context.Background()
	seen := s.counts()
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	require.LessOrEqual(t, dups, window, "duplicated deliveries beyond the at-most-once window: %v", dupKeys(seen))
	for _, r := range runs {
		steps, err := store.RunSteps(ctx, pool, r.ID)
		require.NoError(t, err)
		require.Len(t, steps, 3, "run %s: a, b, c", r.ID)
		var carrier int64
		for _, st := range steps {
			require.Equal(t, store.StepCompleted, st.Status, "run %s step %s", r.ID, st.Key)
			require.Equal(t, 1, st.Attempt, "run %s step %s", r.ID, st.Key)
			require.GreaterOrEqual(t, seen[r.ID.String()+":"+st.Key], 1, "run %s step %s never reached the endpoint", r.ID, st.Key)
			if st.Key == "a" {
				require.Nil(t, st.CarrierJob, "a first step has a job of its own")
				continue
			}
			require.NotNil(t, st.CarrierJob, "run %s step %s was not carried", r.ID, st.Key)
			if carrier == 0 {
				carrier = *st.CarrierJob
			}
			require.Equal(t, carrier, *st.CarrierJob, "run %s: b and c have one carrier", r.ID)
		}
		var jobsOfRun int
		var first int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), min(id) FROM river.river_job
			WHERE args @> jsonb_build_object('run_id', $1::text) OR args ? $1::text`, r.ID.String()).Scan(&jobsOfRun, &first))
		require.Equal(t, 1, jobsOfRun, "run %s: one River job, its first step's, carried the run", r.ID)
		require.Equal(t, first, carrier, "run %s: the carrier is its first step's job", r.ID)
	}
}
