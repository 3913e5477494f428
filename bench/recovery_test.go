package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// BenchmarkRecoveryAfterKill: `rflow start` works 1,000 queued runs whose
// step takes 300 ms, is SIGKILLed with its workers busy, and a new process
// starts at once. It reports the time from the kill to the first step
// request of the new process, and to the first re-execution of a step the
// dead process had in flight (its jobs are rescued through the dead node's
// released liveness lock, not River's RescueStuckJobsAfter).
func BenchmarkRecoveryAfterKill(b *testing.B) {
	const runs = 1000
	ctx := context.Background()
	bin := filepath.Join(b.TempDir(), "rflow")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/rflow").CombinedOutput(); err != nil {
		b.Fatalf("build rflow: %v\n%s", err, out)
	}
	var mu sync.Mutex
	seen := map[string][]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := r.Header.Get("Idempotency-Key")
		seen[key] = append(seen[key], time.Now())
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
	}))
	b.Cleanup(srv.Close)
	config := filepath.Join(b.TempDir(), "rflow.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
name: recovery
workflows:
  - name: slow
    trigger: { manual: {} }
    steps:
      - { id: call, http_call: { method: POST, url: "%s/" } }
`, srv.URL)), 0o644); err != nil {
		b.Fatal(err)
	}
	url := storetest.URL(b)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	project, err := workflow.Load(config, workflow.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.SyncWorkflows(ctx); err != nil {
		b.Fatal(err)
	}
	claims := make([]store.Claim, runs)
	for i := range claims {
		claims[i] = store.Claim{Workflow: "slow", TriggerKey: fmt.Sprint(i), TriggerKind: "manual", Trigger: []byte(`{}`)}
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := e.ClaimTx(ctx, tx, claims); return err }); err != nil {
		b.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "--database-url", url, "--log-level", "error", "start", "-c", config, "--workers", "50")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		return cmd
	}
	first := start()
	// Wait until its 50 workers are all inside a step.
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= 60 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	inFlight := map[string]bool{}
	for k := range seen {
		inFlight[k] = true
	}
	mu.Unlock()
	killed := time.Now()
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	dead := time.Now() // requests after this are the new process's
	second := start()
	defer func() { _ = second.Process.Signal(syscall.SIGTERM); _ = second.Wait() }()

	var toFirst, toRescued time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for toFirst == 0 || toRescued == 0 {
		if time.Now().After(deadline) {
			b.Fatal("the new process resumed nothing within 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		for k, ts := range seen {
			for _, t := range ts {
				if t.Before(dead) {
					continue
				}
				if d := t.Sub(killed); toFirst == 0 || d < toFirst {
					toFirst = d
				}
				if inFlight[k] && len(ts) > 1 {
					if d := t.Sub(killed); toRescued == 0 || d < toRescued {
						toRescued = d
					}
				}
			}
		}
		mu.Unlock()
	}
	b.ReportMetric(toFirst.Seconds(), "s-to-first-step")
	b.ReportMetric(toRescued.Seconds(), "s-to-rescued-step")
	summary.addAbs("kill -9 → first rescued in-flight step", float64(toRescued.Milliseconds()), "ms", "< 2 s", toRescued < 2*time.Second)
	fmt.Printf("kill -9 with %d runs queued: first step of the new process after %s, first rescued in-flight step after %s\n",
		runs, toFirst.Round(time.Millisecond), toRescued.Round(time.Millisecond))
}
