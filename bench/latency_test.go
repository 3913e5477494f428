package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// BenchmarkBlockToFirstStep measures, end to end, the time from a Deposit's
// block being mined on anvil to its run's first step reaching an HTTP
// endpoint: head polling (100 ms), eth_getLogs, decode, claim with the
// first step journaled and enqueued, River pickup, the step's request.
func BenchmarkBlockToFirstStep(b *testing.B) {
	const deposits = 40
	const poll = 100 * time.Millisecond
	ctx := context.Background()
	node := anviltest.Start(b, anviltest.Options{})
	em := anviltest.DeployEmitter(b, node)

	var mu sync.Mutex
	arrived := map[int64]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, _ := strconv.ParseInt(string(body), 10, 64)
		mu.Lock()
		if _, seen := arrived[n]; !seen {
			arrived[n] = time.Now()
		}
		mu.Unlock()
	}))
	b.Cleanup(srv.Close)

	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Emitter.json"), anviltest.EmitterABIJSON(b), 0o644); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "rflow.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
name: latency
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 0, block_poll_interval: %s }
contracts:
  - { name: Emitter, abi: ./Emitter.json, network: local, address: %q }
workflows:
  - name: first-step
    trigger: { event: { contract: Emitter, event: Deposit, run_on: head } }
    steps:
      - { id: tell, http_call: { method: POST, url: "%s/", body: "${{ event.amount }}" } }
`, node.URL, poll, em.Address.Hex(), srv.URL)), 0o644); err != nil {
		b.Fatal(err)
	}
	project, err := workflow.Load(path, workflow.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	url := storetest.URL(b)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: project})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.SyncWorkflows(ctx); err != nil {
		b.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer e.Stop(ctx)
	cfg := e.ChainConfig()
	stop := runChain(b, pool, cfg, e)
	defer stop()
	time.Sleep(time.Second) // let the head tracker settle

	var latencies []time.Duration
	for i := 0; i < b.N; i++ {
		mined := map[int64]time.Time{}
		for d := int64(1); d <= deposits; d++ {
			amount := int64(i)*1000 + d
			em.Deposit(amount) // automine: returns once the block is mined
			mined[amount] = time.Now()
			time.Sleep(time.Duration(50+d*7%100) * time.Millisecond) // spread over the poll phase
		}
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			n := 0
			for a := range mined {
				if _, ok := arrived[a]; ok {
					n++
				}
			}
			mu.Unlock()
			if n == len(mined) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d first steps arrived", n, len(mined))
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		for a, t := range mined {
			latencies = append(latencies, arrived[a].Sub(t))
		}
		mu.Unlock()
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	summary.addAbs("block → first step p50", float64(p50.Milliseconds()), "ms", fmt.Sprintf("≤ %s", poll+50*time.Millisecond), p50 <= poll+50*time.Millisecond)
	fmt.Printf("block -> first step (poll %s): p50 %s  p99 %s  (target p50 <= poll + 50ms = %s)\n",
		poll, p50.Round(time.Millisecond), p99.Round(time.Millisecond), poll+50*time.Millisecond)
}
