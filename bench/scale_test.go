package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// scaleRuns is how many completed runs BenchmarkScale puts in the tables
// first (five step rows each); RFLOW_BENCH_SCALE_RUNS overrides it.
const scaleRuns = 1_000_000

// BenchmarkScale measures the claim path and the step rate on an empty
// database and, alternating with it, on one loaded with scaleRuns finished
// runs and five times as many step rows (one run in a thousand failed),
// and times
// what `rflow runs list`, `rflow runs show` and the console's pages read,
// with both the planner's custom and its generic plans (the pool's
// prepared statements switch to generic plans after five executions).
// With RFLOW_BENCH_EXPLAIN set it prints each query's plan.
func BenchmarkScale(b *testing.B) {
	runs := scaleRuns
	if v := os.Getenv("RFLOW_BENCH_SCALE_RUNS"); v != "" {
		var err error
		runs, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	srv := benchServer(b)
	url := storetest.URL(b)
	empty, full := poolFor(b, storetest.URL(b), 60, planAuto, nil), poolFor(b, url, 60, planAuto, nil)
	start := time.Now()
	seedRuns(b, full, runs)
	fmt.Printf("loaded %d finished runs and %d step rows in %s\n", runs, 5*runs, time.Since(start).Round(time.Second))
	ce, cf := claimEngine(b, empty, "claim"), claimEngine(b, full, "claim")
	for range b.N {
		// Alternate the two databases, so machine noise hits both alike.
		var claimsE, claimsF, stepsE, stepsF []float64
		for round := range benchRounds {
			claimsE = append(claimsE, engineClaimRate(b, empty, ce, "claim", round))
			claimsF = append(claimsF, engineClaimRate(b, full, cf, "claim", round))
			finishClaimed(b, empty)
			finishClaimed(b, full)
			name := fmt.Sprintf("steps%d", round)
			stepsE = append(stepsE, engineStepRateOn(b, empty, srv.URL, name, nil, nil, nil))
			stepsF = append(stepsF, engineStepRateOn(b, full, srv.URL, name, nil, nil, nil))
			fmt.Printf("  round: claims/s empty %.0f, loaded %.0f; steps/s empty %.0f, loaded %.0f\n",
				claimsE[round], claimsF[round], stepsE[round], stepsF[round])
		}
		var rc, rs []float64
		for i := range claimsE {
			rc, rs = append(rc, claimsF[i]/claimsE[i]), append(rs, stepsF[i]/stepsE[i])
		}
		ec, fc, es, fs := median(claimsE), median(claimsF), median(stepsE), median(stepsF)
		fmt.Printf("%d runs in the tables: %.0f claims/s (%.2f of empty: %.0f), %.0f steps/s (%.2f of empty: %.0f) (median ratios)\n",
			runs, fc, median(rc), ec, fs, median(rs), es)
		b.ReportMetric(median(rc), "claims-loaded/empty")
		b.ReportMetric(median(rs), "steps-loaded/empty")
		summary.addRatio(fmt.Sprintf("claims/s with %d runs / empty", runs), fc, ec, median(rc), 0.8)
		summary.addRatio(fmt.Sprintf("steps/s with %d runs / empty", runs), fs, es, median(rs), 0.8)

		worst, worstName, reads := 0.0, "", 0
		for _, mode := range []planMode{planCustom, planGeneric} {
			generic := mode == planGeneric
			for _, q := range scaleQueries(b, poolFor(b, url, 2, mode, nil)) {
				ms := timeQuery(b, q.run)
				reads++
				if ms >= worst {
					worst, worstName = ms, fmt.Sprintf("%s, generic=%v", q.name, generic)
				}
				fmt.Printf("  %-52s generic=%-5v max %6.1f ms\n", q.name, generic, ms)
			}
		}
		fmt.Printf("slowest of %d operator reads: %s, %.1f ms\n", reads, worstName, worst)
		summary.addAbs(fmt.Sprintf("slowest operator read of %d (%s)", reads, worstName), worst, "ms", "< 50 ms", worst < 50)
		if os.Getenv("RFLOW_BENCH_EXPLAIN") != "" {
			explainScale(b, url)
		}
	}
}

// finishClaimed marks the runs the claim measurement created completed
// and drops their jobs, so the step measurement works only its own.
func finishClaimed(b *testing.B, pool *pgxpool.Pool) {
	ctx := context.Background()
	_, err := pool.Exec(ctx, `DELETE FROM river.river_job WHERE coalesce(args->>'run_id', args->>0) IN (
		SELECT id::text FROM rflow.workflow_runs WHERE workflow_name = 'claim' AND status = 'queued')`)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `UPDATE rflow.workflow_runs SET status = 'completed', finished_at = now()
		WHERE workflow_name = 'claim' AND status = 'queued'`)
	require.NoError(b, err)
}

// planMode is a plan_cache_mode: which plans a pool's prepared statements
// get.
type planMode string

const (
	// planAuto is Postgres's default: custom plans for five executions,
	// then the generic one unless it looks dearer.
	planAuto planMode = "auto"
	// planCustom and planGeneric force one kind, so both are measured: a
	// read left on auto may be timed on either.
	planCustom  planMode = "force_custom_plan"
	planGeneric planMode = "force_generic_plan"
)

// poolFor is a pool on url whose statements get mode's plans; rec, when
// set, records what it sends.
func poolFor(b *testing.B, url string, conns int32, mode planMode, rec *storetest.Recorder) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(b, err)
	cfg.MaxConns = conns
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = string(mode)
	if rec != nil {
		cfg.ConnConfig.Tracer = rec
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	return pool
}

// seedRuns loads n finished runs of ten workflows (every thousandth
// failed) with five completed step rows each, spread over 30 days, twenty
// of them compensated.
func seedRuns(b *testing.B, pool *pgxpool.Pool, n int) {
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO rflow.workflows (name, spec_hash, spec) SELECT 'wf' || g, 'h', '{}' FROM generate_series(0, 9) g`,
		`INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, trigger, status, position,
			created_at, updated_at, finished_at, chain_id, block_number, block_hash, error, failed_step)
		 SELECT (lpad(to_hex(g), 12, '0') || '7000' || '8000' || lpad(to_hex(g), 12, '0'))::uuid,
			'wf' || (g % 10), 1, '31337:0x' || md5(g::text) || ':' || (g % 7), 'event',
			jsonb_build_object('input', jsonb_build_object('event', 'Deposit', 'amount', g::text,
				'from', '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266')),
			CASE WHEN g % 1000 = 0 THEN 'failed' ELSE 'completed' END, 'e',
			now() - interval '30 days' + g * (interval '30 days' / $1), now() - interval '30 days' + g * (interval '30 days' / $1),
			now() - interval '30 days' + g * (interval '30 days' / $1) + interval '1 second',
			31337, g / 10, '0x' || md5((g / 10)::text),
			CASE WHEN g % 1000 = 0 THEN 'step e: HTTP 500' END, CASE WHEN g % 1000 = 0 THEN 'e' END
		 FROM generate_series(1, $1::int) g`,
		`INSERT INTO rflow.step_runs (run_id, step_key, step_id, kind, status, input, output, created_at, started_at, finished_at)
		 SELECT r.id, s.k, s.k, 'http_call', 'completed', '{"method":"POST","url":"http://127.0.0.1:9/x"}',
			'{"status":200,"body":{"ok":true}}', r.created_at, r.created_at, r.finished_at
		 FROM rflow.workflow_runs r CROSS JOIN (VALUES ('a'), ('b'), ('c'), ('d'), ('e')) s(k)
		 WHERE r.workflow_name LIKE 'wf%'`,
		// Twenty old runs of wf3 were compensated after a reorg.
		`INSERT INTO rflow.reorg_runs (id, run_id, fork_block, chain_id, depth, decide_at, status)
		 SELECT gen_random_uuid(), id, block_number, 31337, 1, block_number + 12, 'completed'
		 FROM rflow.workflow_runs WHERE workflow_name = 'wf3' ORDER BY created_at LIMIT 20`,
		`VACUUM ANALYZE rflow.workflow_runs`,
		`VACUUM ANALYZE rflow.step_runs`,
		`VACUUM ANALYZE rflow.reorg_runs`,
		`CHECKPOINT`,
	} {
		var err error
		if strings.Contains(q, "$1") {
			_, err = pool.Exec(ctx, q, n)
		} else {
			_, err = pool.Exec(ctx, q)
		}
		require.NoError(b, err, q)
	}
}

type scaleQuery struct {
	name string
	run  func(context.Context) error
}

// scaleQueries are the reads of `rflow runs list` (with each of its
// filters, alone and combined with a workflow, deep pages, and a page of
// --all), `rflow runs show` (by id and by short id) and the console's
// runs, DLQ, run and workflows pages (GET /v1/runs and the console list
// with store.ListRuns too), on a seeded database. By the time they run,
// the newest runs are the claim and step measurements': wf3 and every
// other seeded workflow have no recent runs.
func scaleQueries(b *testing.B, pool *pgxpool.Pool) []scaleQuery {
	ctx := context.Background()
	var failed, failedWf0, deep, deepWf3 uuid.UUID
	for _, c := range []struct {
		sql string
		id  *uuid.UUID
	}{
		{`SELECT id FROM rflow.workflow_runs WHERE status = 'failed' ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET 60`, &failed},
		{`SELECT id FROM rflow.workflow_runs WHERE status = 'failed' AND workflow_name = 'wf0' ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET 60`, &failedWf0},
		{`SELECT id FROM rflow.workflow_runs WHERE workflow_name LIKE 'wf%' ORDER BY created_at LIMIT 1 OFFSET 1000`, &deep},
		{`SELECT id FROM rflow.workflow_runs WHERE workflow_name = 'wf3' ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET 1000`, &deepWf3},
	} {
		require.NoError(b, pool.QueryRow(ctx, c.sql).Scan(c.id), c.sql)
	}
	list := func(f store.RunFilter) func(context.Context) error {
		return func(ctx context.Context) error {
			runs, err := store.ListRuns(ctx, pool, f)
			if err == nil && len(runs) == 0 && f.Status != store.RunRunning && f.Status != store.RunCancelled {
				err = fmt.Errorf("no runs for %+v", f)
			}
			return err
		}
	}
	return []scaleQuery{
		{"runs list", list(store.RunFilter{})},
		{"runs list --failed (console DLQ page)", list(store.RunFilter{Status: store.RunFailed})},
		{"runs list --failed --workflow wf0", list(store.RunFilter{Workflow: "wf0", Status: store.RunFailed})},
		{"runs list --workflow wf3", list(store.RunFilter{Workflow: "wf3"})},
		{"runs list --workflow wf3 --status completed", list(store.RunFilter{Workflow: "wf3", Status: store.RunCompleted})},
		{"runs list --workflow wf3 --status cancelled (none)", list(store.RunFilter{Workflow: "wf3", Status: store.RunCancelled})},
		{"runs list --workflow wf3, a page 1,000 deep", list(store.RunFilter{Workflow: "wf3", Before: &deepWf3})},
		{"runs list --status running (none)", list(store.RunFilter{Status: store.RunRunning})},
		{"runs list --status cancelled (none)", list(store.RunFilter{Status: store.RunCancelled})},
		{"runs list --compensated", list(store.RunFilter{Compensated: true})},
		{"runs list --compensated --workflow wf3", list(store.RunFilter{Workflow: "wf3", Compensated: true})},
		{"runs list --failed, a deep page (--after)", list(store.RunFilter{Status: store.RunFailed, Before: &failed})},
		{"runs list --failed --workflow wf0, a deep page", list(store.RunFilter{Workflow: "wf0", Status: store.RunFailed, Before: &failedWf0})},
		{"runs list, a page 1,000 runs from the oldest", list(store.RunFilter{Before: &deep})},
		{"runs list --all, a 1,000-run page", list(store.RunFilter{Limit: 1000, Before: &deepWf3})},
		{"runs show <id>", func(ctx context.Context) error {
			if _, err := store.GetRun(ctx, pool, failed, false); err != nil {
				return err
			}
			_, err := store.RunSteps(ctx, pool, failed)
			return err
		}},
		{"runs show <short id>", func(ctx context.Context) error {
			runs, err := store.RunsByShortID(ctx, pool, store.ShortID(failed), 2)
			if err == nil && len(runs) != 1 {
				err = fmt.Errorf("%d runs for short id %s", len(runs), store.ShortID(failed))
			}
			return err
		}},
		{"console run page (run + journal)", func(ctx context.Context) error {
			_, _, err := store.RunWithSteps(ctx, pool, failed)
			return err
		}},
		{"console workflows (and every list page)", func(ctx context.Context) error {
			_, err := store.ListWorkflows(ctx, pool, store.Namespace{})
			return err
		}},
	}
}

// timeQuery runs q 12 times (past the planner's switch to a generic plan)
// and returns the slowest of the last 6, in milliseconds.
func timeQuery(b *testing.B, q func(context.Context) error) float64 {
	var ms []float64
	for i := range 12 {
		start := time.Now()
		require.NoError(b, q(context.Background()))
		if i >= 6 {
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
	}
	return slices.Max(ms)
}

// planLine keeps the lines of a plan that say how rows were found.
var planLine = regexp.MustCompile(`Scan|Cond|Filter|Removed|Sort|Join|Loop|Execution Time`)

// explainScale prints the custom and generic plans of every statement the
// timed reads send, as they send it.
func explainScale(b *testing.B, url string) {
	ctx := context.Background()
	rec := &storetest.Recorder{}
	pool := poolFor(b, url, 2, planAuto, rec)
	for _, q := range scaleQueries(b, pool) {
		rec.Take()
		require.NoError(b, q.run(ctx))
		for _, s := range rec.Take() {
			fmt.Printf("\n%s: %s\n", q.name, strings.Join(strings.Fields(s.SQL), " "))
			for _, generic := range []bool{false, true} {
				lines, err := storetest.Explain(ctx, pool, s, generic)
				require.NoError(b, err)
				fmt.Printf("  generic=%v\n", generic)
				for _, l := range lines {
					if planLine.MatchString(l) {
						fmt.Printf("    %s\n", l)
					}
				}
			}
		}
	}
}
