package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/jobs/reorgtest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

const namespaced = `
name: {{PROJECT}}
workflows:
  - name: later
    trigger: { manual: {} }
    steps:
      - { id: wait, delay: 2s }
      - { id: ping, http_call: { url: "{{URL}}/{{PROJECT}}/ping" } }
`

// Two engines of two projects on one database, each with a workflow named
// later: each deploys, claims and runs its own, in its own River queue; a
// repair scan repairs only its own project's runs; the engine refuses
// another project's workflow as not found.
func TestEnginesOfTwoProjectsStayApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := newReceiver(t)
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	engines := map[string]*jobs.Engine{}
	for _, p := range []string{"alpha", "beta"} {
		path := filepath.Join(t.TempDir(), "rflow.yaml")
		yaml := strings.NewReplacer("{{PROJECT}}", p, "{{URL}}", recv.URL).Replace(namespaced)
		require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
		project, err := workflow.Load(path, workflow.LoadOptions{})
		require.NoError(t, err)
		ns, err := store.RegisterProject(ctx, pool, p)
		require.NoError(t, err)
		e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, Namespace: ns, FetchCooldown: time.Millisecond})
		_, err = e.SyncWorkflows(ctx)
		require.NoError(t, err)
		engines[p] = e
	}
	require.True(t, engines["alpha"].Namespace().Home())
	require.False(t, engines["beta"].Namespace().Home())

	claim := func(p, key string) uuid.UUID {
		e := engines[p]
		var id uuid.UUID
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			id, _, err = e.StartRunTx(ctx, tx, store.ManualClaim(e.Namespace().Qualify("later"), key, nil))
			return err
		}))
		return id
	}
	a, b := claim("alpha", "k"), claim("beta", "k")
	require.NotEqual(t, a, b, "one key, two workflows, two runs")
	queueOf := func(id uuid.UUID) []string {
		var qs []string
		rows, err := pool.Query(ctx, `SELECT DISTINCT queue FROM river.river_job WHERE args @> jsonb_build_object('run_id', $1::uuid) OR args ? $1::text`, id)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var q string
			require.NoError(t, rows.Scan(&q))
			qs = append(qs, q)
		}
		return qs
	}
	require.Equal(t, []string{"default"}, queueOf(a))
	require.Equal(t, []string{"project_beta"}, queueOf(b))

	// Both park on their delay; their jobs vanish; beta's scan repairs
	// beta's run only, into beta's queue.
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'waiting_delay'`).Scan(&n)
		return err == nil && n == 2
	}, 30*time.Second, 20*time.Millisecond)
	deleteJobs(t, pool, a)
	deleteJobs(t, pool, b)
	n, err := engines["beta"].RepairRuns(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 0, jobsOf(t, pool, a), "alpha's run is alpha's to repair")
	require.Equal(t, 1, jobsOf(t, pool, b))
	require.Equal(t, []string{"project_beta"}, queueOf(b))
	n, err = engines["alpha"].RepairRuns(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	bundle := &testBundle{pool: pool}
	require.Equal(t, store.RunCompleted, bundle.waitRun(t, a).Status)
	require.Equal(t, store.RunCompleted, bundle.waitRun(t, b).Status)
	require.Len(t, recv.got("/alpha/ping"), 1)
	require.Len(t, recv.got("/beta/ping"), 1)

	// To alpha's engine, beta's workflow does not exist, and the other
	// way round.
	_, err = engines["alpha"].Workflow(ctx, "beta.later")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = engines["beta"].Workflow(ctx, "later")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Error(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, _, err := engines["alpha"].StartRunTx(ctx, tx, store.ManualClaim("beta.later", "k2", nil))
		return err
	}), "alpha's engine never starts beta's run")
}

// A reorg is the chain's: the process of whichever project sees it first
// (alpha here) records it and opens a response for every orphaned run, but
// each response is decided and compensated in its own project's queue by
// its own project's engine: beta's compensation runs in beta's process,
// once, even though alpha's process applied the reorg.
func TestReorgOfTwoProjectsIsAnsweredByEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := newReceiver(t)
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	onReorg := "\n      - { id: undo, http_call: { method: POST, url: \"%[1]s/undo/${{ run.workflow }}\" } }\n"
	engines := map[string]*jobs.Engine{}
	for _, p := range []string{"alpha", "beta"} {
		project := chainProject(t, reorgtest.Project(p, recv.URL, onReorg), nil)
		ns, err := store.RegisterProject(ctx, pool, p)
		require.NoError(t, err)
		e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, Namespace: ns, FetchCooldown: time.Millisecond})
		_, err = e.SyncWorkflows(ctx)
		require.NoError(t, err)
		engines[p] = e
	}
	const fork = 5
	runs := map[string]uuid.UUID{}
	for p, e := range engines {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := e.ClaimTx(ctx, tx, []store.Claim{{Workflow: e.Namespace().Qualify("credit"), TriggerKey: "31337:0x01:0",
				TriggerKind: "event", Trigger: []byte(`{"event": {"amount": 3}, "block": 5, "phase": "head"}`),
				ChainID: 31337, BlockNumber: fork, BlockHash: "0xaa"}})
			return err
		}))
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM rflow.workflow_runs WHERE workflow_name = $1`,
			e.Namespace().Qualify("credit")).Scan(&id))
		runs[p] = id
	}
	require.Eventually(t, func() bool { return len(recv.got("/act")) == 2 }, 20*time.Second, 20*time.Millisecond)
	reorgtest.OrphanFork(t, pool, engines["alpha"], fork)

	var queues []string
	require.NoError(t, func() error {
		rows, err := pool.Query(ctx, `SELECT queue FROM river.river_job WHERE kind = 'rflow.reorg' ORDER BY queue`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				return err
			}
			queues = append(queues, q)
		}
		return rows.Err()
	}())
	require.Equal(t, []string{"default", "project_beta"}, queues, "each response is decided in its run's project's queue")
	require.Eventually(t, func() bool {
		return len(recv.got("/undo/credit")) == 2
	}, 30*time.Second, 20*time.Millisecond, "both runs compensated, each under its project's local name")
	for p, id := range runs {
		require.Eventually(t, func() bool { return reorgtest.Response(t, pool, id).Status == store.RunCompleted },
			30*time.Second, 20*time.Millisecond, "%s's response completes", p)
	}
	require.Len(t, recv.got("/undo/credit"), 2, "each compensated once")
	var by []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempted_by FROM river.river_job WHERE kind = 'rflow.reorg' AND queue = 'project_beta'`).Scan(&by))
	require.NotEmpty(t, by)
	for _, c := range by {
		require.Equal(t, engines["beta"].Client().ID(), c, "beta's response was decided by beta's engine")
	}
}
