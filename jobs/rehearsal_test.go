package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// TestRehearsalRunsOnlyInItsQueue: a rehearsal's run, claimed beside a
// started live engine, waits in the rehearsal's queue untouched by it; the
// live relayer's recovery does not adopt the rehearsal's stale send; the
// rehearsal's engine, once started, adopts that send into its own queue and
// runs the run (dry run: simulated). A rehearsal claimer refuses a live
// workflow's claim.
func TestRehearsalRunsOnlyInItsQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{})
	b, from := startPay(t, []string{node.URL}, 4, jobs.Config{})
	r := store.Rehearsal{Kind: store.RehearsalReplay, Session: "q1", Workflow: "pay"}
	backends, release, err := jobs.DialBackends(ctx, b.project, nil)
	require.NoError(t, err)
	t.Cleanup(release)
	re, err := jobs.NewEngine(jobs.Config{Pool: b.pool, Project: b.project, Backends: backends, DryRun: true, Rehearsal: &jobs.Rehearsal{Rehearsal: r},
		FetchCooldown: time.Millisecond})
	require.NoError(t, err)
	_, err = re.DeployRehearsal(ctx, b.project.Workflow("pay"))
	require.NoError(t, err)

	claim := func(wf string) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := re.RehearsalClaimer().ClaimTx(ctx, tx, []store.Claim{{Workflow: wf, TriggerKey: "k1", TriggerKind: "manual"}})
			return err
		})
	}
	require.ErrorContains(t, claim("pay"), "is not the rehearsal's")
	require.NoError(t, claim(r.Name()))
	runs, err := store.ListRuns(ctx, b.pool, store.RunFilter{Workflow: r.Name()})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	run := runs[0]
	require.Equal(t, "replay:q1:k1", run.TriggerKey)

	// A stale send in flight of the rehearsal's run (as a dead replay
	// would leave it).
	txID := uuid.New()
	_, err = b.pool.Exec(ctx, `INSERT INTO relayer.transactions (tx_id, external_id, wallet, chain_id, from_address, to_address, dry_run, checked_at)
		VALUES ($1, $2, 'ops', 31337, $3, '0x000000000000000000000000000000000000dEaD', true, now() - interval '1 hour')`,
		txID, "rflow:"+run.ID.String()+":other:1", from.Hex())
	require.NoError(t, err)
	require.NoError(t, b.engine.Recover(ctx))
	time.Sleep(time.Second)
	jobsOf := func(q string) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE queue = $1
			AND (coalesce(args->>'run_id', args->>0) = $2 OR args->>'tx_id' = $3)`, q, run.ID.String(), txID.String()).Scan(&n))
		return n
	}
	require.Zero(t, jobsOf("default"), "the live engine enqueued rehearsal work in its queue")
	require.Equal(t, 1, jobsOf(r.Queue()), "the run's first step waits in the rehearsal's queue")
	got, err := store.GetRun(ctx, b.pool, run.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, got.Status, "the live engine worked a rehearsal run")

	rctx, cancel := context.WithCancel(ctx)
	require.NoError(t, re.Start(rctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = re.Stop(sctx)
		cancel()
	})
	done := b.waitRun(t, run.ID)
	require.Equal(t, store.RunCompleted, done.Status)
	out, err := workflow.UnmarshalJSON(b.steps(t, run.ID)["pay"].Output)
	require.NoError(t, err)
	require.Equal(t, "simulated", out.(map[string]any)["status"])
	require.Eventually(t, func() bool {
		var status string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM relayer.transactions WHERE tx_id = $1`, txID).Scan(&status))
		return status == "simulated"
	}, 30*time.Second, 50*time.Millisecond, "the rehearsal's relayer adopts its own stale send")
	require.Zero(t, jobsOf("default"))
}

// A live engine never runs a namespaced workflow: a claim for one (say a
// POST to /v1/workflows/test_…/runs) fails and leaves no run, and looking
// it up (a webhook) finds nothing. A rehearsal engine, in turn, refuses a
// live workflow.
func TestLiveEngineRefusesRehearsals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, `
name: scoped
workflows:
  - name: wf
    trigger: { manual: {} }
    steps: [ { id: a, http_call: { url: "{{URL}}/a" } } ]
`)
	pool, e := b.pool, b.engine
	wf := b.project.Workflow("wf")
	ns := store.Rehearsal{Kind: store.RehearsalTest, Session: uuid.NewString(), Workflow: "wf"}.Name()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.DeployWorkflow(ctx, tx, ns, wf.Hash, wf.Spec)
		return err
	}))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, _, err := e.StartRunTx(ctx, tx, store.ManualClaim(ns, "k", nil))
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "a live process never runs")
	_, err = e.Workflow(ctx, ns)
	require.ErrorIs(t, err, store.ErrNotFound)
	var runs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&runs))
	require.Zero(t, runs)

	schema := "rehearsal_" + uuid.New().String()[:8] + "000000000000000000000000"
	require.NoError(t, store.CreateRehearsalRiver(ctx, pool, schema))
	t.Cleanup(func() { _ = store.DropRehearsalRiver(context.Background(), pool, schema) })
	r, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: b.project, Rehearsal: &jobs.Rehearsal{
		Rehearsal: store.Rehearsal{Kind: store.RehearsalTest}, RiverSchema: schema,
		Send: func(context.Context, jobs.SendCapture) (map[string]any, error) { return nil, nil }}})
	require.NoError(t, err)
	_, err = r.Workflow(ctx, "wf")
	require.ErrorContains(t, err, "a rehearsal never runs a live workflow")
	got, err := r.Workflow(ctx, ns)
	require.NoError(t, err)
	require.Equal(t, ns, got.Name, "guards and budgets key on the namespaced name")
	// A configuration that could not stay apart is refused.
	for want, bad := range map[string]jobs.Rehearsal{
		"rehearsal kind":      {Rehearsal: store.Rehearsal{Kind: "live"}, RiverSchema: schema},
		"every session needs": {Rehearsal: store.Rehearsal{Kind: store.RehearsalTest}},
		"must capture":        {Rehearsal: store.Rehearsal{Kind: store.RehearsalTest}, RiverSchema: schema},
		"session":             {Rehearsal: store.Rehearsal{Kind: store.RehearsalReplay, Session: "Bad_Session"}},
	} {
		_, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: b.project, Rehearsal: &bad})
		require.ErrorContains(t, err, want)
	}
}
