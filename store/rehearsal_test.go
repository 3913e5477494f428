package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestRehearsalNames(t *testing.T) {
	t.Parallel()
	r := store.Rehearsal{Kind: store.RehearsalReplay, Session: "3f9a1c2b", Workflow: "refund-large_deposits"}
	require.Equal(t, "replay_3f9a1c2b__refund-large_deposits", r.Name())
	require.Equal(t, "replay_3f9a1c2b", r.Queue())
	require.Equal(t, "replay:3f9a1c2b:31337:0xab:0", r.TriggerKey("31337:0xab:0"))
	got, ok := store.ParseRehearsal(r.Name())
	require.True(t, ok)
	require.Equal(t, r, got)
	tr, ok := store.ParseRehearsal("test_0c2f6a1e-4b7d-4a55-9b0e-2a3c4d5e6f70__w")
	require.True(t, ok)
	require.Equal(t, store.RehearsalTest, tr.Kind)
	require.Equal(t, "test_0c2f6a1e-4b7d-4a55-9b0e-2a3c4d5e6f70", store.QueueOf(tr.Name()))
	for _, live := range []string{"replay", "replay_x", "replay_abc_w", "deposits", "Replay_ab__w", "other_ab__w", "replay___w", "replay_AB__w"} {
		require.False(t, store.IsRehearsal(live), live)
		require.Equal(t, "default", store.QueueOf(live), live)
	}
	require.Error(t, store.ValidSession("Has_Upper"))
	require.Error(t, store.ValidSession("-x"))
	require.NoError(t, store.ValidSession("a1-b2"))
}

// PruneRehearsals deletes a session's runs, journal, queue jobs, budgets
// and workflow, and nothing of a live workflow or another session, even
// one whose live name looks alike; a run a job is working stays.
func TestPruneRehearsals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newPruneFixture(t) // live workflows a and b
	s1 := store.Rehearsal{Kind: store.RehearsalReplay, Session: "s1", Workflow: "a"}
	s2 := store.Rehearsal{Kind: store.RehearsalReplay, Session: "s2", Workflow: "a"}
	tst := store.Rehearsal{Kind: store.RehearsalTest, Session: "t1", Workflow: "a"}
	for _, name := range []string{s1.Name(), s2.Name(), tst.Name()} {
		_, err := f.pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ($1, 'h', '{}', 1)`, name)
		require.NoError(t, err)
	}
	_, err := f.pool.Exec(ctx, `INSERT INTO rflow.budgets (workflow_name, name, asset, cap, cap_text, span) VALUES ($1, 'b', 'native', 1, '1 wei', '1 hour')`, s1.Name())
	require.NoError(t, err)
	var live, mine, other []string
	for i, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		live = append(live, f.add(t, "a", "manual", k, store.RunCompleted, time.Hour, "completed").String())
		mine = append(mine, f.add(t, s1.Name(), "event", s1.TriggerKey(k), store.RunStatus([]string{"completed", "failed", "waiting_event", "queued", "completed"}[i]), time.Hour, "").String())
		other = append(other, f.add(t, s2.Name(), "event", s2.TriggerKey(k), store.RunCompleted, time.Hour, "").String())
		f.add(t, tst.Name(), "manual", tst.TriggerKey(k), store.RunCompleted, time.Hour, "")
	}
	// Jobs of the session in its queue: finished, scheduled, and one running
	// (a step's first attempt: args [run id, "step/generation"]).
	for i, state := range []string{"completed", "scheduled", "running"} {
		kind, args := "rflow.step", `jsonb_build_object('run_id', $1::uuid)`
		if state == "running" {
			kind, args = "rflow.step.first", `jsonb_build_array($1::text, 's/1')`
		}
		_, err := f.pool.Exec(ctx, `
			INSERT INTO river.river_job (kind, args, state, max_attempts, queue, attempted_at, finalized_at)
			VALUES ($4, `+args+`, $2::river.river_job_state, 5, $3, now(),
				CASE WHEN $2 = 'completed' THEN now() END)`,
			mine[i+2], state, s1.Queue(), kind)
		require.NoError(t, err)
	}
	liveJobs := count(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = 'default'`)

	got, err := store.PruneRehearsals(ctx, f.pool, store.RehearsalPruneFilter{Kind: store.RehearsalReplay, Session: "s1", Batch: 2})
	require.NoError(t, err)
	require.EqualValues(t, 4, got.Runs, "every run but the one a job is working")
	require.EqualValues(t, 1, got.Busy)
	require.EqualValues(t, 2, got.Jobs)
	require.Zero(t, got.Workflows, "the workflow stays while a run is left")
	require.Equal(t, 1, count(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, s1.Name()))
	require.Equal(t, 5, count(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'a'`))
	require.Equal(t, 5, count(t, f.pool, `SELECT count(*) FROM rflow.step_runs WHERE run_id = ANY($1::uuid[])`, live))
	require.Equal(t, liveJobs, count(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = 'default'`))
	require.Equal(t, 5, count(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE id = ANY($1::uuid[])`, other))

	// The job finishes; the next prune takes the rest, budgets and workflow.
	_, err = f.pool.Exec(ctx, `UPDATE river.river_job SET state = 'completed', finalized_at = now() WHERE queue = $1`, s1.Queue())
	require.NoError(t, err)
	got, err = store.PruneRehearsals(ctx, f.pool, store.RehearsalPruneFilter{Kind: store.RehearsalReplay, Session: "s1"})
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Runs)
	require.EqualValues(t, 1, got.Workflows)
	require.Zero(t, count(t, f.pool, `SELECT count(*) FROM rflow.workflows WHERE name = $1`, s1.Name()))
	require.Zero(t, count(t, f.pool, `SELECT count(*) FROM rflow.budgets WHERE workflow_name = $1`, s1.Name()))
	require.Zero(t, count(t, f.pool, `SELECT count(*) FROM river.river_job WHERE queue = $1`, s1.Queue()))
	require.Zero(t, count(t, f.pool, `SELECT count(*) FROM rflow.step_runs WHERE run_id = ANY($1::uuid[])`, mine),
		"the session's journal goes with its runs")

	// --all of replays: s2 goes, the test session and live rows stay.
	got, err = store.PruneRehearsals(ctx, f.pool, store.RehearsalPruneFilter{Kind: store.RehearsalReplay})
	require.NoError(t, err)
	require.EqualValues(t, 5, got.Runs)
	require.Equal(t, 5, count(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, tst.Name()))
	require.Equal(t, 5, count(t, f.pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'a'`))
	require.Equal(t, 2, count(t, f.pool, `SELECT count(*) FROM rflow.workflows WHERE name IN ('a', 'b')`))

	// Listings hide rehearsals unless asked.
	runs, err := store.ListRuns(ctx, f.pool, store.RunFilter{Limit: 100})
	require.NoError(t, err)
	require.Len(t, runs, 5)
	runs, err = store.ListRuns(ctx, f.pool, store.RunFilter{Limit: 100, Rehearsals: true})
	require.NoError(t, err)
	require.Len(t, runs, 10)
	runs, err = store.ListRuns(ctx, f.pool, store.RunFilter{Workflow: tst.Name()})
	require.NoError(t, err)
	require.Len(t, runs, 5)
	wfs, err := store.ListWorkflows(ctx, f.pool, store.Namespace{})
	require.NoError(t, err)
	require.Len(t, wfs, 2)
	gens, err := store.WorkflowGenerations(ctx, f.pool, store.Namespace{})
	require.NoError(t, err)
	require.Len(t, gens, 2)
}

func count(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// A workflow test's namespaced workflow stays out of every live listing,
// and pruning its session deletes its rows and never a live workflow's.
func TestRehearsalNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	r := store.Rehearsal{Kind: store.RehearsalTest, Session: uuid.NewString(), Workflow: "wf"}
	ns := r.Name()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, name := range []string{"wf", ns} {
			if _, err := store.DeployWorkflow(ctx, tx, name, "h", []byte(`{"name":"wf"}`)); err != nil {
				return err
			}
			if _, err := store.ClaimRuns(ctx, tx, []store.Claim{{Workflow: name, TriggerKey: "k", TriggerKind: "manual", Trigger: []byte(`{}`)}}); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE rflow.workflow_runs SET status = 'throttled'`)
		return err
	}))

	wfs, err := store.ListWorkflows(ctx, pool, store.Namespace{})
	require.NoError(t, err)
	require.Len(t, wfs, 1)
	require.Equal(t, "wf", wfs[0].Name)
	gens, err := store.WorkflowGenerations(ctx, pool, store.Namespace{})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"wf": 1}, gens)
	// Throttled runs are listed for every engine; each releases only the
	// workflows it owns (jobs: Engine.owns).
	throttled, err := store.ThrottledWorkflows(ctx, pool)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"wf", ns}, throttled)

	// A live name is no session: nothing a prune filter selects can be one.
	require.Error(t, store.ValidSession("wf__x"))
	got, err := store.PruneRehearsals(ctx, pool, store.RehearsalPruneFilter{Kind: store.RehearsalTest, Session: r.Session})
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Runs)
	require.EqualValues(t, 1, got.Workflows)
	var live, left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE workflow_name = 'wf'),
		count(*) FILTER (WHERE workflow_name <> 'wf') FROM rflow.workflow_runs`).Scan(&live, &left))
	require.Equal(t, 1, live)
	require.Zero(t, left)
	_, err = store.GetWorkflow(ctx, pool, ns)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.Error(t, store.CreateRehearsalRiver(ctx, pool, "river"), "only rehearsal_<hex> schemas")
	require.Error(t, store.DropRehearsalRiver(ctx, pool, "river"), "never the live River schema")
}
