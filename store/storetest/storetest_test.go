package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := storetest.Pool(t), storetest.Pool(t)

	_, err := a.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec) VALUES ('only-in-a', 'h', '{}')`)
	require.NoError(t, err)

	var n int
	require.NoError(t, b.QueryRow(ctx, `SELECT count(*) FROM rflow.workflows`).Scan(&n))
	require.Zero(t, n, "database b sees a's rows")
	require.NoError(t, a.QueryRow(ctx, `SELECT count(*) FROM rflow.workflows`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestMigratedTemplate(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	var river, runs bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT to_regclass('river.river_job') IS NOT NULL, to_regclass('rflow.workflow_runs') IS NOT NULL`).Scan(&river, &runs))
	require.True(t, river, "river schema missing")
	require.True(t, runs, "rflow schema missing")
}

// TestNoServerLeftBehind runs this test binary again as a child whose test
// starts the private cluster and then fails hard (os.Exit without cleanup),
// and checks that the child's postgres is gone afterwards.
func TestNoServerLeftBehind(t *testing.T) {
	if os.Getenv("STORETEST_CHILD") != "" {
		srv := storetest.Server(t)
		if srv == nil {
			t.Skip("external server")
		}
		storetest.URL(t)
		os.Stdout.WriteString("PID=" + strconv.Itoa(srv.Pid()) + "\n")
		os.Exit(3) // a crash: neither Cleanup nor Main's Shutdown runs
	}
	if os.Getenv(storetest.EnvURL) != "" {
		t.Skip("uses an external server; no private cluster to leak")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoServerLeftBehind$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STORETEST_CHILD=1")
	out, _ := cmd.CombinedOutput()
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "PID="); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(p))
		}
	}
	require.NotZero(t, pid, "child printed no postgres pid: %s", out)
	require.Eventually(t, func() bool {
		return syscall.Kill(pid, 0) != nil
	}, 20e9, 50e6, "postgres %d outlived its test binary", pid)
}
