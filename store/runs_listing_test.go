package store_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// seedListing inserts n runs of the given workflows, claimed in batches
// of up to seven that share created_at, with statuses spread over
// completed, failed, cancelled and running; every 13th run has a finished
// reorg response, every 11th a pending one.
func seedListing(t *testing.T, pool *pgxpool.Pool, workflows []string, n, offset int) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation)
		SELECT w, 'h', '{}', 1 FROM unnest($1::text[]) w ON CONFLICT DO NOTHING`, workflows)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, trigger,
			status, created_at, updated_at)
		SELECT uuid_generate_v7ish, ($1::text[])[1 + (abs(hashint4(g)::bigint) % cardinality($1::text[]))], 1, 'k' || g, 'manual', jsonb_build_object('pad', repeat('x', 300)),
			(ARRAY['completed', 'completed', 'completed', 'failed', 'cancelled', 'running'])[1 + (abs(hashint4(g + 7)::bigint) % 6)],
			timestamptz '2026-01-01' + ((g + $3) / 7) * interval '1 second', now()
		FROM generate_series(1, $2::int) g,
			LATERAL (SELECT (lpad(to_hex(g + $3), 12, '0') || '7000' || '8' || lpad(to_hex(abs(hashint4(g + $3)::bigint)), 15, '0'))::uuid) u(uuid_generate_v7ish)`,
		workflows, n, offset)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO rflow.reorg_runs (id, run_id, fork_block, chain_id, depth, decide_at, status)
		SELECT gen_random_uuid(), id, 1, 31337, 1, 1, CASE WHEN abs(hashtext(trigger_key)::bigint) % 13 = 0 THEN 'completed' ELSE 'pending' END
		FROM rflow.workflow_runs
		WHERE trigger_key LIKE 'k%' AND (abs(hashtext(trigger_key)::bigint) % 13 = 0 OR abs(hashtext(trigger_key)::bigint) % 11 = 0)
		ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE rflow.workflow_runs; ANALYZE rflow.reorg_runs`)
	require.NoError(t, err)
}

// listed is what the simplest reading of a filter returns (its Limit and
// Before aside): every run, newest first by (created_at, id), filtered in Go.
func listed(t *testing.T, pool *pgxpool.Pool, f store.RunFilter) []uuid.UUID {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, workflow_name, status, EXISTS (SELECT 1 FROM rflow.reorg_runs rr
			WHERE rr.run_id = r.id AND rr.status NOT IN ('pending', 'reincluded'))
		FROM rflow.workflow_runs r ORDER BY created_at DESC, id DESC`)
	require.NoError(t, err)
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		var wf, status string
		var compensated bool
		require.NoError(t, rows.Scan(&id, &wf, &status, &compensated))
		switch {
		case f.Workflow != "" && wf != f.Workflow,
			f.Workflow == "" && !f.Rehearsals && store.IsRehearsal(wf),
			f.Status != "" && status != string(f.Status),
			f.Compensated && !compensated:
		default:
			ids = append(ids, id)
		}
	}
	require.NoError(t, rows.Err())
	return ids
}

// ListRuns returns, page by page, what the simplest query returns, for
// every filter it takes: same runs, same order, same page boundaries.
func TestListRunsMatchesSimpleQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	seedListing(t, pool, []string{"a", "b", "c", "test_s1__a"}, 3000, 0)
	var filters []store.RunFilter
	for _, wf := range []string{"", "a", "c", "test_s1__a", "none"} {
		for _, st := range []store.RunStatus{"", store.RunCompleted, store.RunFailed, store.RunCancelled, store.RunRunning, store.RunQueued} {
			for _, comp := range []bool{false, true} {
				for _, reh := range []bool{false, true} {
					filters = append(filters, store.RunFilter{Workflow: wf, Status: st, Compensated: comp, Rehearsals: reh, Limit: 37})
				}
			}
		}
	}
	for _, f := range filters {
		name := fmt.Sprintf("%+v", f)
		want := listed(t, pool, f)
		if f.Workflow != "none" && f.Status != store.RunQueued {
			require.NotEmpty(t, want, "%s: the data set has runs for every filter but these", name)
		}
		for page := 0; ; page++ {
			runs, err := store.ListRuns(ctx, pool, f)
			require.NoError(t, err, name)
			var got []uuid.UUID
			for _, r := range runs {
				got = append(got, r.ID)
			}
			end := min(len(want), (page+1)*f.Limit)
			require.Equal(t, append([]uuid.UUID(nil), want[page*f.Limit:end]...), got, "%s, page %d", name, page)
			if len(got) < f.Limit {
				break
			}
			f.Before = &got[len(got)-1]
		}
	}
}

// scanIndex matches a plan's scan of workflow_runs and the index it uses.
var scanIndex = regexp.MustCompile(`(Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan)( using (\w+))? on workflow_runs`)

// removed matches a plan's count of rows a filter rejected.
var removed = regexp.MustCompile(`Rows Removed by Filter: (\d+)`)

// With the newest runs all of another workflow, a filter on an old
// workflow or status reads that workflow's (or status's) index, under the
// planner's custom and generic plans: no sequential scan, no walk through
// the newest runs discarding them (what an equality on workflow_name got,
// 155–444 ms at 1,000,000 runs), no sort of every match.
func TestListRunsPlansUseTheFilterIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(storetest.Pool(t).Config().ConnString())
	require.NoError(t, err)
	rec := &storetest.Recorder{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// Old history interleaved, then the newest 5,000 runs all "e-recent"
	// (and all completed).
	seedListing(t, pool, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, 30000, 0)
	_, err = pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('e-recent', 'h', '{}', 1)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, trigger,
			status, created_at, updated_at)
		SELECT gen_random_uuid(), 'e-recent', 1, 'o' || g, 'manual', jsonb_build_object('pad', repeat('x', 300)), 'completed', timestamptz '2026-06-01' + g * interval '1 ms', now()
		FROM generate_series(1, 5000) g;
		ANALYZE rflow.workflow_runs`)
	require.NoError(t, err)
	var deep uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM rflow.workflow_runs WHERE workflow_name = 'a' AND status = 'completed'
		ORDER BY created_at DESC, id DESC OFFSET 500 LIMIT 1`).Scan(&deep))
	for _, c := range []struct {
		f     store.RunFilter
		index string
	}{
		{store.RunFilter{Workflow: "a"}, "workflow_runs_workflow_paging"},
		{store.RunFilter{Workflow: "a", Before: &deep}, "workflow_runs_workflow_paging"},
		{store.RunFilter{Workflow: "a", Status: store.RunCompleted}, "workflow_runs_workflow_status"},
		{store.RunFilter{Workflow: "a", Status: store.RunCompleted, Before: &deep}, "workflow_runs_workflow_status"},
		{store.RunFilter{Workflow: "a", Status: store.RunFailed}, "workflow_runs_workflow_status"},
		{store.RunFilter{Workflow: "a", Status: store.RunQueued}, "workflow_runs_workflow_status"},
		{store.RunFilter{Status: store.RunCancelled}, "workflow_runs_status_paging"},
		{store.RunFilter{Status: store.RunFailed, Before: &deep}, "workflow_runs_status_paging"},
		{store.RunFilter{}, "workflow_runs_paging"},
		{store.RunFilter{Before: &deep}, "workflow_runs_paging"},
	} {
		rec.Take()
		_, err := store.ListRuns(ctx, pool, c.f)
		require.NoError(t, err)
		stmts := rec.Take()
		list := stmts[len(stmts)-1] // after the Before run's lookup
		for _, generic := range []bool{false, true} {
			lines, err := storetest.Explain(ctx, pool, list, generic)
			require.NoError(t, err)
			plan := strings.Join(lines, "\n")
			name := fmt.Sprintf("%+v generic=%v\n%s", c.f, generic, plan)
			if len(list.Args) > 1 { // parameters beyond the limit show in the conditions
				assert.Equal(t, generic, strings.Contains(plan, "$1"), "a generic plan names its parameters: %s", name)
			}
			scans := scanIndex.FindAllStringSubmatch(plan, -1)
			if assert.Len(t, scans, 1, name) {
				assert.Equal(t, c.index, scans[0][3], name)
			}
			assert.NotContains(t, plan, "Sort", name)
			for _, m := range removed.FindAllStringSubmatch(plan, -1) {
				n, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				assert.LessOrEqual(t, n, 50, "a filter-walk: %s", name)
			}
		}
	}
}
