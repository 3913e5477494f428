package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const (
	claimPathRuns  = 10000
	claimPathBatch = 500
)

// BenchmarkClaimPath is the claim path without a chain node: batches of
// event-shaped claims through the engine (run row, first step journaled,
// its River job) against, in the same run on the same database, the bare
// claim gate (run rows only) and a raw batched run-row + job-row insert
// (the gate's INSERT plus River's COPY of one job per run). Rounds
// alternate so machine noise hits all three alike; medians are reported.
// With RFLOW_BENCH_TRACE set it also prints where the engine's
// transactions spend their time, statement by statement.
func BenchmarkClaimPath(b *testing.B) {
	ctx := context.Background()
	trace := &stmtTimes{}
	cfg, err := pgxpool.ParseConfig(storetest.URL(b))
	require.NoError(b, err)
	if os.Getenv("RFLOW_BENCH_TRACE") != "" {
		cfg.ConnConfig.Tracer = trace
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	e := claimEngine(b, pool, "claim")
	addWorkflow(b, pool, "raw")
	addWorkflow(b, pool, "rawjob")
	client := insertClient(b, pool)

	var engine, gateRate, rawJob, toGate, toRaw []float64
	// Postgres CPU (clock ticks of the backends that ran the batches):
	// unlike the rates, machine load barely moves it.
	var cpuGate, cpuRaw, cpuEngine int64
	round := 0
	for range b.N {
		for range benchRounds {
			round++
			g := claimRateCPU(b, pool, claimsFor("raw", round), func(tx pgx.Tx, c []store.Claim) error {
				_, err := store.ClaimRuns(ctx, tx, c)
				return err
			}, &cpuGate)
			r := claimRateCPU(b, pool, claimsFor("rawjob", round), func(tx pgx.Tx, c []store.Claim) error {
				return runAndJobRows(ctx, client, tx, c)
			}, &cpuRaw)
			trace.reset()
			en := claimRateCPU(b, pool, claimsFor("claim", round), func(tx pgx.Tx, c []store.Claim) error {
				_, err := e.ClaimTx(ctx, tx, c)
				return err
			}, &cpuEngine)
			trace.print("engine claim path")
			gateRate, rawJob, engine = append(gateRate, g), append(rawJob, r), append(engine, en)
			toGate, toRaw = append(toGate, en/g), append(toRaw, en/r)
			fmt.Printf("  round: engine %.0f claims/s, run+job rows %.0f/s, bare gate %.0f/s\n", en, r, g)
		}
	}
	en, r, g := median(engine), median(rawJob), median(gateRate)
	b.ReportMetric(en, "engine-claims/s")
	b.ReportMetric(r, "run+job-rows/s")
	b.ReportMetric(g, "bare-gate/s")
	// The ratios are the medians of each round's, measured seconds apart;
	// the rates' medians may come from different rounds.
	rg, rr := median(toGate), median(toRaw)
	b.ReportMetric(rg, "engine/gate")
	b.ReportMetric(rr, "engine/run+job")
	fmt.Printf("claim path: engine %.0f claims/s  run+job rows %.0f/s  bare gate %.0f/s  engine/gate %.2f  engine/run+job %.2f (median ratios)\n",
		en, r, g, rg, rr)
	if cpuEngine > 0 {
		fmt.Printf("claim path, Postgres CPU: engine %d ticks, run+job rows %d, bare gate %d; gate/engine %.2f, run+job/engine %.2f\n",
			cpuEngine, cpuRaw, cpuGate, float64(cpuGate)/float64(cpuEngine), float64(cpuRaw)/float64(cpuEngine))
	}
	summary.addRatio("claims: engine / bare gate (no node)", en, g, rg, 0.6)
	summary.addRatio("claims: engine / raw run+job rows (no node)", en, r, rr, 0.5)
}

// claimEngine is an engine (not started) on pool whose one workflow, name,
// has an event-shaped manual trigger and one http_call step.
func claimEngine(b *testing.B, pool *pgxpool.Pool, name string) *jobs.Engine {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "rflow.yaml")
	require.NoError(b, os.WriteFile(path, []byte(`
name: bench
workflows:
  - name: `+name+`
    trigger: { manual: {} }
    steps:
      - { id: tell, http_call: { method: POST, url: "http://127.0.0.1:9/x", body: "${{ trigger.input }}" } }
`), 0o644))
	project, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(b, err)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: project})
	require.NoError(b, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(b, err)
	return e
}

// engineClaimRate is the engine's claim rate on claimPathRuns fresh claims
// of e's workflow name.
func engineClaimRate(b *testing.B, pool *pgxpool.Pool, e *jobs.Engine, name string, round int) float64 {
	return claimRate(b, pool, claimsFor(name, round), func(tx pgx.Tx, c []store.Claim) error {
		_, err := e.ClaimTx(context.Background(), tx, c)
		return err
	})
}

// claimsFor is claimPathRuns claims of workflow wf with payloads shaped
// like a decoded Deposit log.
func claimsFor(wf string, round int) []store.Claim {
	claims := make([]store.Claim, claimPathRuns)
	for i := range claims {
		claims[i] = store.Claim{
			Workflow: wf, TriggerKind: "event", ChainID: 31337, BlockNumber: int64(i / 100),
			BlockHash:  fmt.Sprintf("0x%064x", i/100),
			TriggerKey: fmt.Sprintf("31337:0x%064x:%d:%d", round, i, i%100),
			Trigger: []byte(fmt.Sprintf(`{"input":{"event":"Deposit","address":"0x5fbdb2315678afecb367f032d93f642f64180aa3",`+
				`"args":{"from":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266","amount":"%d"},"block_number":%d,`+
				`"tx_hash":"0x%064x","log_index":%d}}`, i, i/100, i, i%100)),
		}
	}
	return claims
}

func claimRate(b *testing.B, pool *pgxpool.Pool, claims []store.Claim, claim func(pgx.Tx, []store.Claim) error) float64 {
	return claimRateCPU(b, pool, claims, claim, nil)
}

// claimRateCPU is claimRate, adding to *ticks (when not nil) the CPU time
// the Postgres backends used for the batches, commits included.
func claimRateCPU(b *testing.B, pool *pgxpool.Pool, claims []store.Claim, claim func(pgx.Tx, []store.Claim) error, ticks *int64) float64 {
	ctx := context.Background()
	start := time.Now()
	for j := 0; j < len(claims); j += claimPathBatch {
		var pid uint32
		var cpu0 int64
		require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if ticks != nil {
				pid = tx.Conn().PgConn().PID()
				cpu0 = backendCPU(pid)
			}
			return claim(tx, claims[j:min(j+claimPathBatch, len(claims))])
		}))
		if ticks != nil {
			*ticks += backendCPU(pid) - cpu0
		}
	}
	return float64(len(claims)) / time.Since(start).Seconds()
}

// insertClient is a River client that only inserts (no workers run).
func insertClient(b *testing.B, pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: store.RiverSchema})
	require.NoError(b, err)
	return client
}

// runAndJobRows is the raw baseline of a claim batch: the claim gate's
// run rows and one River job row per run (by COPY), nothing journaled.
func runAndJobRows(ctx context.Context, client *river.Client[pgx.Tx], tx pgx.Tx, c []store.Claim) error {
	won, err := store.ClaimRuns(ctx, tx, c)
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, len(won))
	for i, w := range won {
		params[i] = river.InsertManyParams{Args: noopArgs{Run: w.ID.String()}}
	}
	_, err = client.InsertManyFastTx(ctx, tx, params)
	return err
}

type noopArgs struct {
	Run string `json:"run"`
}

func (noopArgs) Kind() string { return "bench.noop" }

// stmtTimes is a pgx tracer that adds up the time of each statement (by
// its first words), the profile of a transaction's round trips.
type stmtTimes struct {
	mu    sync.Mutex
	total map[string]time.Duration
	count map[string]int
	cpu   map[string]int64 // the backend's CPU ticks (backendCPU)
}

type stmtKey struct{}

type stmtStart struct {
	sql string
	at  time.Time
	pid uint32
	cpu int64
}

func (s *stmtTimes) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total, s.count, s.cpu = map[string]time.Duration{}, map[string]int{}, map[string]int64{}
}

func (s *stmtTimes) add(st stmtStart) {
	sql, d := st.sql, time.Since(st.at)
	cpu := backendCPU(st.pid) - st.cpu
	f := strings.Fields(sql)
	sql = strings.Join(f[:min(len(f), 5)], " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total == nil {
		return
	}
	s.total[sql] += d
	s.count[sql]++
	s.cpu[sql] += cpu
}

func (s *stmtTimes) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, stmtKey{}, startStmt(c, d.SQL))
}

func startStmt(c *pgx.Conn, sql string) stmtStart {
	pid := c.PgConn().PID()
	return stmtStart{sql: sql, at: time.Now(), pid: pid, cpu: backendCPU(pid)}
}

func (s *stmtTimes) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if st, ok := ctx.Value(stmtKey{}).(stmtStart); ok {
		s.add(st)
	}
}

func (s *stmtTimes) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	return context.WithValue(ctx, stmtKey{}, startStmt(c, "COPY "+d.TableName.Sanitize()))
}

func (s *stmtTimes) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	if st, ok := ctx.Value(stmtKey{}).(stmtStart); ok {
		s.add(st)
	}
}

func (s *stmtTimes) print(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.total) == 0 {
		return
	}
	keys := make([]string, 0, len(s.total))
	for k := range s.total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return s.total[keys[i]] > s.total[keys[j]] })
	fmt.Printf("  %s, time and Postgres CPU (clock ticks) per statement:\n", what)
	for _, k := range keys {
		fmt.Printf("    %8.1f ms  %4d ticks  %5d×  %s\n", float64(s.total[k].Microseconds())/1000, s.cpu[k], s.count[k], k)
	}
}

// BenchmarkClaimJobArgs is the River job row of a claim, by its args:
// batches of 500 first-step jobs inserted as the claim path does
// (InsertManyFastTx, by COPY), as rflow.step.first (run, step, generation)
// and, alternating with it on the same database, as rflow.step with all
// of StepArgs (two keys more in River's GIN index on args). No run or step
// rows: the job row's own cost.
func BenchmarkClaimJobArgs(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, storetest.URL(b))
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	client := insertClient(b, pool)
	shapes := []struct {
		name string
		args func(uuid.UUID) river.JobArgs
	}{
		{"rflow.step.first", func(id uuid.UUID) river.JobArgs {
			return jobs.FirstStepArgs{RunID: id, StepKey: "tell", Generation: 1}
		}},
		{"rflow.step", func(id uuid.UUID) river.JobArgs {
			return jobs.StepArgs{RunID: id, StepKey: "tell", Generation: 1, RunAttempt: 1, Attempt: 1}
		}},
	}
	ms := make([][]float64, len(shapes))
	wal := make([]int64, len(shapes))
	cpu := make([]int64, len(shapes))
	self := make([]time.Duration, len(shapes))
	for range b.N {
		for round := range 4 * benchRounds {
			for k := range shapes {
				k = (k + round) % len(shapes) // alternate which goes first
				var d time.Duration
				for range claimPathRuns / claimPathBatch / 2 {
					params := make([]river.InsertManyParams, claimPathBatch)
					for i := range params {
						params[i] = river.InsertManyParams{Args: shapes[k].args(uuid.Must(uuid.NewV7()))}
					}
					require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						var before, after int64
						if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&before); err != nil {
							return err
						}
						pid := tx.Conn().PgConn().PID()
						cpu0 := backendCPU(pid)
						start, self0 := time.Now(), selfCPU()
						_, err := client.InsertManyFastTx(ctx, tx, params)
						d += time.Since(start)
						self[k] += selfCPU() - self0
						if err != nil {
							return err
						}
						if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&after); err != nil {
							return err
						}
						wal[k] += after - before
						cpu[k] += backendCPU(pid) - cpu0
						return nil
					}))
				}
				ms[k] = append(ms[k], float64(d.Microseconds())/1000)
			}
		}
	}
	first, full := median(ms[0]), median(ms[1])
	b.ReportMetric(first, "first-step-ms/5000")
	b.ReportMetric(full, "step-ms/5000")
	n := float64(len(ms[0]) * claimPathRuns / 2)
	fmt.Printf("claim job rows (median of %d rounds, 5,000 jobs each): %s %.0f ms, %s %.0f ms (%.2f); WAL per job %.0f and %.0f bytes; backend CPU %d and %d ticks; this process's CPU %v and %v\n",
		len(ms[0]), shapes[0].name, first, shapes[1].name, full, first/full, float64(wal[0])/n, float64(wal[1])/n, cpu[0], cpu[1], self[0].Round(time.Millisecond), self[1].Round(time.Millisecond))
}
