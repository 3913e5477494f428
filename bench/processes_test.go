package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// buildRflow builds the rflow binary for benchmarks that run real
// processes.
func buildRflow(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "rflow")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/rflow").CombinedOutput(); err != nil {
		b.Fatalf("build rflow: %v\n%s", err, out)
	}
	return bin
}

// queueRuns writes a project with one 3-step http_call workflow calling
// url, and claims n runs of it on a fresh database (their first steps
// journaled and enqueued); it returns the database URL, a pool on it and
// the project file.
func queueRuns(b *testing.B, url string, n int) (string, *pgxpool.Pool, string) {
	return claimRuns(b, fmt.Sprintf(`
name: procs
workflows:
  - name: three
    trigger: { manual: {} }
    steps:
      - { id: a, http_call: { method: POST, url: "%[1]s/a" } }
      - { id: b, http_call: { method: POST, url: "%[1]s/b" } }
      - { id: c, http_call: { method: POST, url: "%[1]s/c" } }
`, url), nil, "three", n, func(int) []byte { return []byte(`{}`) })
}

// claimRuns writes projectYAML (and files beside it, by name) and claims n
// manual runs of workflow on a fresh database, run i with trigger
// payload(i), the way the engine claims them: first steps journaled and
// enqueued, or parked. It returns the database URL, a pool on it and the
// project file.
func claimRuns(b *testing.B, projectYAML string, files map[string][]byte, wf string, n int, payload func(i int) []byte) (string, *pgxpool.Pool, string) {
	ctx := context.Background()
	dir := b.TempDir()
	for name, data := range files {
		require.NoError(b, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	config := filepath.Join(dir, "rflow.yaml")
	require.NoError(b, os.WriteFile(config, []byte(projectYAML), 0o644))
	db := storetest.URL(b)
	pool, err := pgxpool.New(ctx, db)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	project, err := workflow.Load(config, workflow.LoadOptions{})
	require.NoError(b, err)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project})
	require.NoError(b, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(b, err)
	claims := make([]store.Claim, 0, 500)
	for i := 0; i < n; i += 500 {
		claims = claims[:0]
		for j := i; j < min(n, i+500); j++ {
			claims = append(claims, store.Claim{Workflow: wf, TriggerKey: strconv.Itoa(j), TriggerKind: trigger.Manual, Trigger: payload(j)})
		}
		require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := e.ClaimTx(ctx, tx, claims); return err }))
	}
	return db, pool, config
}

func startRflow(b *testing.B, bin, db, config string, extra ...string) *exec.Cmd {
	args := append([]string{"--database-url", db, "--log-level", "error", "start", "-c", config}, extra...)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if s := stderr.String(); strings.TrimSpace(s) != "" {
			b.Logf("rflow start: %s", s)
		}
	})
	return cmd
}

// BenchmarkProcesses works the same 1,500 queued 3-step runs with 1, 2
// and 4 `rflow start` processes (50 workers each) on one Postgres and
// reports steps per second for each: the scale-out curve.
func BenchmarkProcesses(b *testing.B) {
	const runs = 1500
	bin := buildRflow(b)
	srv := benchServer(b)
	rates := map[int]float64{}
	for range b.N {
		for _, procs := range []int{1, 2, 4} {
			db, pool, config := queueRuns(b, srv.URL, runs)
			start := time.Now()
			for range procs {
				startRflow(b, bin, db, config, "--workers", "50")
			}
			waitCount(b, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`, runs)
			rates[procs] = float64(3*runs) / time.Since(start).Seconds()
			fmt.Printf("  %d process(es): %.0f steps/s (%.2f of one)\n", procs, rates[procs], rates[procs]/rates[1])
			b.ReportMetric(rates[procs], fmt.Sprintf("steps/s-%dproc", procs))
		}
	}
	summary.add("steps/s, 2 processes / 1", rates[2], rates[1], 0)
	summary.add("steps/s, 4 processes / 1", rates[4], rates[1], 0)
}

// BenchmarkMemoryQueued starts `rflow start` on 100,000 queued runs and
// samples its resident memory while it works them for 30 s (or until they
// are done), reporting the peak.
func BenchmarkMemoryQueued(b *testing.B) {
	runs := 100_000
	if v := os.Getenv("RFLOW_BENCH_QUEUED_RUNS"); v != "" {
		var err error
		runs, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	bin := buildRflow(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	b.Cleanup(srv.Close)
	var peak int64
	for range b.N {
		db, pool, config := queueRuns(b, srv.URL, runs)
		cmd := startRflow(b, bin, db, config)
		stop := samplePeakRSS(b, cmd.Process.Pid)
		time.Sleep(30 * time.Second)
		peak = max(peak, stop())
		var done int
		require.NoError(b, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM rflow.step_runs WHERE status = 'completed'`).Scan(&done))
		require.NotZero(b, done, "rflow start worked no step in 30 s")
		fmt.Printf("rflow start with %d queued runs: peak RSS %.0f MB (%d steps completed in 30 s)\n", runs, float64(peak)/1024, done)
	}
	b.ReportMetric(float64(peak)/1024, "MB-peak-RSS")
	summary.addAbs(fmt.Sprintf("rflow start RSS, %d queued runs", runs), float64(peak)/1024, "MB", "< 300 MB", peak < 300*1024)
}

// samplePeakRSS reads pid's peak resident set (VmHWM) every 100 ms until
// the returned function is called, which returns the highest in kB.
func samplePeakRSS(b *testing.B, pid int) func() int64 {
	var peak atomic.Int64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			kb, err := procStatusKB(pid, "VmHWM")
			if err != nil {
				b.Error(err)
				return
			}
			peak.Store(max(peak.Load(), kb))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

// procStatusKB reads one kB field of /proc/<pid>/status.
func procStatusKB(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, fmt.Errorf("/proc/%d/status: empty %s", pid, field)
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
