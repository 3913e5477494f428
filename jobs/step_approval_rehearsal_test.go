package jobs_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// TestLiveDecisionOfReplayGate: a replay's run parked at an approval gate
// (its jobs in the session's queue of the live schema, which only that
// replay works) cannot be decided by a live process (rflow approve, the
// API, the console): the decision would enqueue the run's next job in the
// session's queue, where it waits for good once the replay has ended (or
// is taken by a later replay of the same session). The refusal names the
// session and what removes it; the gate stays pending, no job of the run
// lands anywhere, and the replay itself settles the gate at its expiry
// (on_timeout: proceed), sending exactly once.
func TestLiveDecisionOfReplayGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startGates(t, "6s", "proceed")
	start := b.nonce(t)
	r := store.Rehearsal{Kind: store.RehearsalReplay, Session: "gate1", Workflow: "gated"}
	replay := startEngineWith(t, jobs.Config{Pool: b.pool, Project: b.project, FetchCooldown: time.Millisecond,
		Rehearsal: &jobs.Rehearsal{Rehearsal: r}})
	_, err := replay.DeployRehearsal(ctx, b.project.Workflow("gated"))
	require.NoError(t, err)
	input, _ := json.Marshal(map[string]any{"input": map[string]any{"amount": 10, "value": 10,
		"to": "0x000000000000000000000000000000000000dEaD", "data": "0x"}})
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := replay.RehearsalClaimer().ClaimTx(ctx, tx, []store.Claim{{Workflow: r.Name(), TriggerKey: "k1",
			TriggerKind: "manual", Trigger: input}})
		return err
	}))
	runs, err := store.ListRuns(ctx, b.pool, store.RunFilter{Workflow: r.Name()})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	id := runs[0].ID
	ap := b.parked(t, id)

	jobsOfRun := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE coalesce(args->>'run_id', args->>0) = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, id.String()).Scan(&n))
		return n
	}
	before := jobsOfRun() // the gate's expiry job
	for _, approve := range []bool{true, false} {
		_, err = b.decide(t, ap.ID, store.ApprovalDecision{Approve: approve, By: "cli:ops"})
		var conflict *store.ApprovalConflictError
		require.ErrorAs(t, err, &conflict, "a live process decided a replay's gate")
		require.Contains(t, conflict.Msg, "replay session gate1")
		require.Contains(t, conflict.Msg, "rflow replay prune --session gate1")
	}
	require.Equal(t, before, jobsOfRun(), "a refused decision enqueued a job")
	got, err := store.GetApproval(ctx, b.pool, ap.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.ApprovalPending, got.Status)
	require.Nil(t, got.DecidedBy)
	require.Equal(t, start, b.nonce(t), "nothing sent before the expiry")

	run := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, run.Status, "the replay settles its own gate at its expiry")
	got, err = store.GetApproval(ctx, b.pool, ap.ID, false)
	require.NoError(t, err)
	require.Equal(t, store.ApprovalExpired, got.Status)
	require.Equal(t, start+1, b.nonce(t), "exactly one transaction")
}

// TestTestRehearsalCapturesGatedSend: an rflow test engine (a River schema
// of its own, sends captured) never parks at an approval gate, so no live
// decision can reach one: the gated send is captured once, as the
// relayer would have been handed it, and no approval row is written.
func TestTestRehearsalCapturesGatedSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startGates(t, "1h", "reject")
	schema := "rehearsal_" + uuid.New().String()[:8] + "000000000000000000000000"
	require.NoError(t, store.CreateRehearsalRiver(ctx, b.pool, schema))
	t.Cleanup(func() { _ = store.DropRehearsalRiver(context.Background(), b.pool, schema) })
	var captured atomic.Int32
	rehearsal := startEngineWith(t, jobs.Config{Pool: b.pool, Project: b.project, FetchCooldown: time.Millisecond,
		Rehearsal: &jobs.Rehearsal{Rehearsal: store.Rehearsal{Kind: store.RehearsalTest}, RiverSchema: schema,
			Send: func(context.Context, jobs.SendCapture) (map[string]any, error) {
				captured.Add(1)
				return map[string]any{"hash": "0x01"}, nil
			}}})
	wf := b.project.Workflow("gated")
	ns := store.Rehearsal{Kind: store.RehearsalTest, Session: uuid.NewString(), Workflow: "gated"}.Name()
	input, _ := json.Marshal(map[string]any{"input": map[string]any{"amount": 10, "value": 10,
		"to": "0x000000000000000000000000000000000000dEaD", "data": "0x"}})
	var id uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := store.DeployWorkflow(ctx, tx, ns, wf.Hash, wf.Spec); err != nil {
			return err
		}
		var err error
		id, _, err = rehearsal.StartRunTx(ctx, tx, store.Claim{Workflow: ns, TriggerKey: "k", TriggerKind: "manual", Trigger: input})
		return err
	}))
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)
	require.EqualValues(t, 1, captured.Load())
	aps, err := store.ListApprovals(ctx, b.pool, store.ApprovalFilter{RunID: id})
	require.NoError(t, err)
	require.Empty(t, aps, "a test's captured send opened a gate")
}
