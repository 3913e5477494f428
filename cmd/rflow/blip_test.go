package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// A short database blip of one process (its liveness connection cut again
// and again for 3 s, pg_terminate_backend) while its 4 s steps are in
// flight: the other process never takes it for dead, so no step runs
// twice at the same time, and every run completes.
func TestConnectionBlipNeverRunsAStepTwiceAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newOverlapSink(t, 4*time.Second)
	config := writeConfig(t, fmt.Sprintf(restartProject, s.URL))
	dbURL := storetest.URL(t)
	pool := openPool(t, dbURL)
	a := startRflowWorkers(t, dbURL, config, "", 8)
	enqueueWorkflowRuns(t, pool, config, "pipeline", "b", 4)
	s.waitActive(t, 4) // a works all four first steps
	b := startRflowWorkers(t, dbURL, config, "", 8)
	defer b.stop(t)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.nodes`) == 2
	}, 30*time.Second, 50*time.Millisecond, "b registered; output:\n%s", b.out)

	aPid := a.cmd.Process.Pid
	cuts := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		tag, err := pool.Exec(ctx, `
			SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN rflow.nodes n ON l.objid = n.id
			WHERE l.locktype = 'advisory' AND l.granted AND n.pid = $1`, aPid)
		require.NoError(t, err)
		cuts += int(tag.RowsAffected())
		time.Sleep(200 * time.Millisecond)
	}
	require.Positive(t, cuts, "a's liveness connection was cut")
	defer a.stop(t)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`) == 4
	}, 60*time.Second, 100*time.Millisecond, "a:\n%s\nb:\n%s", a.out, b.out)
	require.Empty(t, s.concurrentDuplicates(), "a step ran twice at the same time; a:\n%s\nb:\n%s", a.out, b.out)
	for key, n := range s.deliveries() {
		require.Equal(t, 1, n, "%s delivered once", key)
	}
}
