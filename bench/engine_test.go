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
	rounds := benchRounds
	if n, err := strconv.Atoi(os.Getenv("RFLOW_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for range b.N {
		for range rounds {
			c := riverChainRate(b, srv.URL, true)
			e := engineStepRate(b, srv.URL)
			l := riverChainRate(b, srv.URL, false)
			chain, engine, ratio = append(chain, c), append(engine, e), append(ratio, e/c)
			lazy, lazyRatio = append(lazy, l), append(lazyRatio, e/l)
			fmt.Printf("  round: engine %.0f steps/s, river chain %.0f steps/s, ratio %.2f; chain with River's completer %.0f steps/s, ratio %.2f\n",
				e, c, e/c, l, e/l)
		}
	}
	e, c, r := median(engine), median(chain), median(ratio)
	b.ReportMetric(e, "engine-steps/s")
	b.ReportMetric(c, "river-chain-steps/s")
	b.ReportMetric(r, "ratio")
	fmt.Printf("engine steps/s: %.0f  river-chain steps/s: %.0f  ratio: %.2f\n", e, c, r)
	summary.addRatio("steps/s: engine / raw River chain", e, c, r, 0.95)
	summary.addRatio("steps/s: engine / raw chain, River's completer (at least once)", e, median(lazy), median(lazyRatio), 0)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func engineStepRate(b *testing.B, url string) float64 {
	trace := &stmtTimes{}
	defer trace.print("engine steps")
	pool := tracedPool(b, trace)
	defer pool.Close() // a round's connections go with it: rounds are many
	return engineStepRateOn(b, pool, url, "three", trace)
}

// engineStepRateOn is engineStepRate on pool's database, with a workflow
// named name (so it can run again on the same database); trace may be nil.
func engineStepRateOn(b *testing.B, pool *pgxpool.Pool, url, name string, trace *stmtTimes) float64 {
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
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project, Workers: benchWorkers, FetchCooldown: benchCooldown})
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
	require.NoError(b, e.Start(ctx))
	defer e.Stop(ctx)
	waitCount(b, pool, fmt.Sprintf(`SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = '%s' AND status = 'completed'`, name), benchRuns)
	rate := float64(3*benchRuns) / time.Since(start).Seconds()
	printCPU("engine", cpu, 3*benchRuns)
	return rate
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
func riverChainRate(b *testing.B, url string, completeTx bool) float64 {
	ctx := context.Background()
	what := "river chain"
	if !completeTx {
		what = "river chain, River's completer"
	}
	trace := &stmtTimes{}
	defer trace.print(what + " steps")
	pool := tracedPool(b, trace)
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
	require.NoError(b, client.Start(ctx))
	defer client.Stop(ctx)
	waitCount(b, pool, `SELECT count(*) FROM bench_steps`, 3*benchRuns)
	rate := float64(3*benchRuns) / time.Since(start).Seconds()
	printCPU(what, cpu, 3*benchRuns)
	return rate
}

// printCPU prints the CPU a round cost per step, in this process (workers,
// River, pgx) and in Postgres.
func printCPU(what string, cpu *cpuMeter, steps int) {
	if cpu == nil {
		return
	}
	g, p := cpu.perUnit(steps)
	fmt.Printf("  %s CPU per step: this process %.2f ms, postgres %.2f ms\n", what,
		float64(g.Microseconds())/1000, float64(p.Microseconds())/1000)
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
