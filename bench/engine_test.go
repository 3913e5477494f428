package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const (
	benchRuns     = 600
	benchWorkers  = 50
	benchCooldown = 2 * time.Millisecond
	benchRounds   = 3
)

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchPool(b *testing.B) *pgxpool.Pool { return tracedPool(b, nil) }

// tracedPool is benchPool with trace as its statement tracer when
// RFLOW_BENCH_TRACE is set.
func tracedPool(b *testing.B, trace *stmtTimes) *pgxpool.Pool {
	return tracedPoolAt(b, storetest.URL(b), trace)
}

// tracedPoolAt is tracedPool on the database at url.
func tracedPoolAt(b *testing.B, url string, trace *stmtTimes) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(b, err)
	cfg.MaxConns = 60
	if trace != nil && os.Getenv("RFLOW_BENCH_TRACE") != "" {
		cfg.ConnConfig.Tracer = trace
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	return pool
}

// BenchmarkEngineVsRiverChain runs a 3-step http_call workflow through the
// engine, and side by side on the same Postgres a raw River chain doing the
// same HTTP call and one transaction per step (a row, InsertTx of the next
// job, JobCompleteTx). It prints both rates and their ratio.
//
// The engine leaves a step job's completion to River's batched completer
// (its journal's fence makes a second run of a settled job a no-op); the
// baseline completes each job in its transaction, as a raw chain must to
// write its rows once. So that the difference is in view, each round also
// runs the chain with completion left to River's completer (its rows then
// at least once, not exactly once), reported as an informational figure.
//
// The two alternate for benchRounds rounds (RFLOW_BENCH_ROUNDS to change
// it), so machine noise hits both alike; the figures printed are the
// medians. Each round also prints the CPU a step cost each side, in this
// process and in Postgres: on a shared machine that is steadier than the
// rates.
func BenchmarkEngineVsRiverChain(b *testing.B) {
	srv := benchServer(b)
	var engine, chain, ratio, lazy, lazyRatio []float64
	var engineCPU, lazyCPU []float64
	rounds := benchRounds
	if n, err := strconv.Atoi(os.Getenv("RFLOW_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	var turns [3]float64 // engine, exactly-once chain, at-least-once chain
	for range b.N {
		for range rounds {
			c := riverChainRate(b, srv.URL, true, nil, nil)
			e := engineStepRate(b, srv.URL, nil, &engineCPU)
			l := riverChainRate(b, srv.URL, false, &lazyCPU, nil)
			chain, engine, ratio = append(chain, c), append(engine, e), append(ratio, e/c)
			lazy, lazyRatio = append(lazy, l), append(lazyRatio, e/l)
			fmt.Printf("  round: engine %.0f steps/s, river chain %.0f steps/s, ratio %.2f; chain with River's completer %.0f steps/s, ratio %.2f\n",
				e, c, e/c, l, e/l)
		}
		// Round trips, counted in one more run of each side through a
		// proxy with no latency (its rate is not used).
		for i, run := range []func(*turnCount){
			func(tc *turnCount) { engineStepRate(b, srv.URL, tc, nil) },
			func(tc *turnCount) { riverChainRate(b, srv.URL, true, nil, tc) },
			func(tc *turnCount) { riverChainRate(b, srv.URL, false, nil, tc) },
		} {
			tc := newTurnCount(b)
			run(tc)
			turns[i] = tc.perStep(3 * benchRuns)
		}
		fmt.Printf("  database round trips per step: engine %.2f, river chain %.2f, chain with River's completer %.2f\n",
			turns[0], turns[1], turns[2])
	}
	e, c, r := median(engine), median(chain), median(ratio)
	b.ReportMetric(e, "engine-steps/s")
	b.ReportMetric(c, "river-chain-steps/s")
	b.ReportMetric(r, "ratio")
	b.ReportMetric(turns[0], "engine-round-trips/step")
	b.ReportMetric(turns[2], "chain-round-trips/step")
	fmt.Printf("engine steps/s: %.0f  river-chain steps/s: %.0f  ratio: %.2f\n", e, c, r)
	summary.addRatio("steps/s: engine / raw chain, River's completer (at least once)", e, median(lazy), median(lazyRatio), 1.0)
	summary.addRatio("steps/s: engine / raw River chain (exactly once)", e, c, r, 0.95)
	summary.add("database round trips per 100 steps: engine / at-least-once chain", 100*turns[0], 100*turns[2], 0)
	summary.add("Postgres CPU µs per step: engine / at-least-once chain", median(engineCPU), median(lazyCPU), 0)
}

// turnCount counts one side's database round trips while its steps run:
// its pool goes through a latency proxy with no latency
// (remote_db_test.go), and the benchmark's own polling (waitCount) through
// a direct pool, so only the side's own are counted.
type turnCount struct {
	proxy *latencyProxy
	far   string        // the database through the proxy
	watch *pgxpool.Pool // direct
	from  int64
	n     int64
}

func newTurnCount(b *testing.B) *turnCount {
	db := storetest.URL(b)
	proxy, far := startLatencyProxy(b, db, 0)
	return &turnCount{proxy: proxy, far: far, watch: tracedPoolAt(b, db, nil)}
}

// pool is the pool a side works on: through the proxy when tc counts,
// else direct with trace.
func (tc *turnCount) pool(b *testing.B, trace *stmtTimes) *pgxpool.Pool {
	if tc == nil {
		return tracedPool(b, trace)
	}
	return tracedPoolAt(b, tc.far, nil)
}

// watchOr is the pool waitCount polls on.
func (tc *turnCount) watchOr(p *pgxpool.Pool) *pgxpool.Pool {
	if tc == nil {
		return p
	}
	return tc.watch
}

func (tc *turnCount) begin() {
	if tc != nil {
		tc.from = tc.proxy.turns.Load()
	}
}

func (tc *turnCount) end() {
	if tc != nil {
		tc.n = tc.proxy.turns.Load() - tc.from
	}
}

func (tc *turnCount) perStep(steps int) float64 { return float64(tc.n) / float64(steps) }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// engineStepRate runs the engine's side; tc counts its round trips (nil:
// none), and cpu gets the Postgres CPU of a step in µs (nil: not kept).
func engineStepRate(b *testing.B, url string, tc *turnCount, cpu *[]float64) float64 {
	trace := &stmtTimes{}
	defer trace.print("engine steps")
	pool := tc.pool(b, trace)
	defer pool.Close() // a round's connections go with it: rounds are many
	return engineStepRateOn(b, pool, url, "three", trace, tc, cpu)
}

// engineStepRateOn is engineStepRate on pool's database, with a workflow
// named name (so it can run again on the same database); trace, tc and cpu
// may be nil.
func engineStepRateOn(b *testing.B, pool *pgxpool.Pool, url, name string, trace *stmtTimes, tc *turnCount, cpuOut *[]float64) float64 {
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(b, os.WriteFile(path, []byte(fmt.Sprintf(`
name: bench
workflows:
  - name: %[2]s
    trigger: { manual: {} }
    steps:
      - { id: a, http_call: { method: POST, url: "%[1]s/a" } }
      - { id: b, http_call: { method: POST, url: "%[1]s/b" } }
      - { id: c, http_call: { method: POST, url: "%[1]s/c" } }
`, url, name)), 0o644))
	project, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(b, err)
	// RFLOW_BENCH_NO_INLINE=1 measures the engine with every step a job of
	// its own (no inline continuation).
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project, Workers: benchWorkers, FetchCooldown: benchCooldown,
		NoInline: os.Getenv("RFLOW_BENCH_NO_INLINE") != ""})
	require.NoError(b, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(b, err)
	claims := make([]store.Claim, benchRuns)
	for i := range claims {
		claims[i] = store.Claim{Workflow: name, TriggerKey: fmt.Sprint(i), TriggerKind: "manual", Trigger: []byte(`{}`)}
	}
	require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := e.ClaimTx(ctx, tx, claims)
		return err
	}))
	var cpu *cpuMeter
	if trace != nil {
		trace.reset()
		cpu = startCPU(ctx, pool)
	}
	start := time.Now()
	tc.begin()
	require.NoError(b, e.Start(ctx))
	fmt.Printf("  engine started in %.1f ms (boot recovery included)\n", float64(time.Since(start).Microseconds())/1000)
	defer e.Stop(ctx)
	waitCount(b, tc.watchOr(pool), fmt.Sprintf(`SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = '%s' AND status = 'completed'`, name), benchRuns)
	tc.end()
	rate := float64(3*benchRuns) / time.Since(start).Seconds()
	keepCPU(cpuOut, printCPU("engine", cpu, 3*benchRuns))
	return rate
}

// keepCPU appends a round's Postgres CPU per step (µs) to out, if kept.
func keepCPU(out *[]float64, pg float64) {
	if out != nil && pg > 0 {
		*out = append(*out, pg)
	}
}

type chainArgs struct {
	Chain uuid.UUID `json:"chain"`
	Step  int       `json:"step"`
	URL   string    `json:"url"`
}

func (chainArgs) Kind() string { return "bench.chain" }

type chainWorker struct {
	river.WorkerDefaults[chainArgs]
	pool *pgxpool.Pool
	http *http.Client
	// completeTx completes the job in its step's transaction; without it
	// River's completer does, after Work returns.
	completeTx bool
}

func (w *chainWorker) Work(ctx context.Context, job *river.Job[chainArgs]) error {
	resp, err := w.http.Post(fmt.Sprintf("%s/%d", job.Args.URL, job.Args.Step), "application/json", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if w.completeTx {
			done, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			if err != nil {
				return err
			}
			if done.State != rivertype.JobStateCompleted {
				return fmt.Errorf("job not completed")
			}
		}
		var err error
		if _, err = tx.Exec(ctx, `INSERT INTO bench_steps (chain, step) VALUES ($1, $2)`, job.Args.Chain, job.Args.Step); err != nil {
			return err
		}
		if job.Args.Step < 3 {
			next := job.Args
			next.Step++
			_, err = river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, next, nil)
		}
		return err
	})
}

// riverChainRate runs the raw River chain; completeTx completes each job
// in its step's transaction (JobCompleteTx), else River's completer does.
// cpu and tc are as engineStepRate's (tc optional).
func riverChainRate(b *testing.B, url string, completeTx bool, cpuOut *[]float64, tc *turnCount) float64 {
	ctx := context.Background()
	what := "river chain"
	if !completeTx {
		what = "river chain, River's completer"
	}
	trace := &stmtTimes{}
	defer trace.print(what + " steps")
	pool := tc.pool(b, trace)
	defer pool.Close()
	_, err := pool.Exec(ctx, `CREATE TABLE bench_steps (chain uuid, step int, PRIMARY KEY (chain, step))`)
	require.NoError(b, err)
	workers := river.NewWorkers()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64 // as the engine's
	river.AddWorker(workers, &chainWorker{pool: pool, http: &http.Client{Transport: transport}, completeTx: completeTx})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: store.RiverSchema, Workers: workers, FetchCooldown: benchCooldown, FetchPollInterval: 20 * time.Millisecond, // the engine's
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: benchWorkers}},
	})
	require.NoError(b, err)
	params := make([]river.InsertManyParams, benchRuns)
	for i := range params {
		params[i] = river.InsertManyParams{Args: chainArgs{Chain: uuid.New(), Step: 1, URL: url}}
	}
	_, err = client.InsertMany(ctx, params)
	require.NoError(b, err)
	trace.reset()
	cpu := startCPU(ctx, pool)
	start := time.Now()
	tc.begin()
	require.NoError(b, client.Start(ctx))
	fmt.Printf("  river chain client started in %.1f ms\n", float64(time.Since(start).Microseconds())/1000)
	defer client.Stop(ctx)
	waitCount(b, tc.watchOr(pool), `SELECT count(*) FROM bench_steps`, 3*benchRuns)
	tc.end()
	rate := float64(3*benchRuns) / time.Since(start).Seconds()
	keepCPU(cpuOut, printCPU(what, cpu, 3*benchRuns))
	return rate
}

// printCPU prints the CPU a round cost per step, in this process (workers,
// River, pgx) and in Postgres, and returns Postgres's in µs (0 when not
// measured).
func printCPU(what string, cpu *cpuMeter, steps int) float64 {
	if cpu == nil {
		return 0
	}
	g, p := cpu.perUnit(steps)
	fmt.Printf("  %s CPU per step: this process %.2f ms, postgres %.2f ms\n", what,
		float64(g.Microseconds())/1000, float64(p.Microseconds())/1000)
	return float64(p.Microseconds())
}

func waitCount(b *testing.B, pool *pgxpool.Pool, query string, want int) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var n int
		require.NoError(b, pool.QueryRow(context.Background(), query).Scan(&n))
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d after 5m", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
