package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// slowStart is `rflow start` working runs whose /slow call is in flight.
type slowStart struct {
	p      *proc
	pool   *pgxpool.Pool
	sink   *overlapSink
	config string
	dbURL  string
}

// startSlow starts `rflow start` on project (its calls to a sink whose
// /slow answers after delay), claims n runs keyed prefix… and waits until
// n calls are being answered.
func startSlow(t *testing.T, project string, delay time.Duration, prefix string, n int) slowStart {
	t.Helper()
	d := slowStart{sink: newOverlapSink(t, delay), dbURL: storetest.URL(t)}
	d.config = writeConfig(t, fmt.Sprintf(project, d.sink.URL))
	pool, err := pgxpool.New(context.Background(), d.dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d.pool = pool
	d.p = startRflowArgs(t, nil, "--database-url", d.dbURL, "--log-level", "info", "start", "-c", d.config)
	enqueueWorkflowRuns(t, pool, d.config, "pipeline", prefix, n)
	d.sink.waitActive(t, n)
	return d
}

// carriedSlowProject's slow step is the second, which the first step's
// job carries inline.
const carriedSlowProject = `
name: restart
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: a
        http_call: { method: POST, url: "%[1]s/fast" }
      - id: b
        http_call: { method: POST, url: "%[1]s/slow" }
`

// SIGTERM while a carried step is in flight: the shutdown names the step
// being worked, not the one its job started with.
func TestShutdownNamesTheCarriedStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startSlow(t, carriedSlowProject, 3*time.Second, "c", 1)
	pool, p := d.pool, d.p
	var carried int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.step_runs WHERE step_key = 'b' AND carrier_job IS NOT NULL`).Scan(&carried))
	require.Equal(t, 1, carried, "step b is carried by step a's job")

	p.stop(t)
	out := p.out.String()
	require.Contains(t, out, "in_flight=1", out)
	require.Regexp(t, `run [0-9a-f-]{36} step b"`, out, "it names the carried step")
	require.NotRegexp(t, `run [0-9a-f-]{36} step a"`, out)
}

// SIGTERM while 4 s steps are in flight: rflow says what it waits for,
// lets them finish and journal, and exits 0; the next process re-runs
// nothing of them.
func TestShutdownDrainsStepsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startSlow(t, restartProject, 4*time.Second, "d", 2)
	pool, s, config, dbURL := d.pool, d.sink, d.config, d.dbURL

	sent := time.Now()
	d.p.stop(t)
	out := d.p.out.String()
	require.GreaterOrEqual(t, time.Since(sent), 2*time.Second, "it waited for the steps")
	require.Contains(t, out, "in_flight=2", out)
	require.Regexp(t, `run [0-9a-f-]{36} step a`, out, "it names what it waits for")
	require.Contains(t, out, "stopped: everything in flight reached its journal")

	var completed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.step_runs WHERE step_key = 'a' AND status = 'completed'`).Scan(&completed))
	require.Equal(t, 2, completed, "both steps journaled their outcome before the exit")

	q := startRflow(t, dbURL, config, "")
	defer q.stop(t)
	require.Eventually(t, func() bool {
		var done int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`).Scan(&done))
		return done == 2
	}, 30*time.Second, 50*time.Millisecond, "output:\n%s", q.out)
	for key, n := range s.deliveries() {
		require.Equal(t, 1, n, "%s delivered once", key)
	}
}
