package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// TestApprovalRows: a gate is one row per send attempt (opening it again
// returns it), it is settled once (a second decision changes nothing and
// says so), a short id finds it, a cancel settles only pending gates, and
// listings hide the gates of rehearsals unless asked.
func TestApprovalRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newPruneFixture(t) // live workflows a and b
	rh := store.Rehearsal{Kind: store.RehearsalReplay, Session: "s1", Workflow: "a"}
	_, err := f.pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ($1, 'h', '{}', 1)`, rh.Name())
	require.NoError(t, err)
	live := f.add(t, "a", "manual", "k1", store.RunWaitingApproval, time.Minute, "")
	other := f.add(t, "b", "manual", "k2", store.RunWaitingApproval, time.Minute, "")
	rehearsal := f.add(t, rh.Name(), "manual", rh.TriggerKey("k1"), store.RunWaitingApproval, time.Minute, "")

	open := func(run uuid.UUID, wf string) (*store.Approval, bool) {
		var ap *store.Approval
		var created bool
		require.NoError(t, pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			var err error
			ap, created, err = store.CreateApproval(ctx, tx, store.Approval{ID: uuid.New(), RunID: run, StepKey: "pay", Attempt: 1,
				Workflow: wf, StepID: "pay", Summary: []byte(`{"value":"1"}`), OnTimeout: "reject", ExpiresAt: time.Now().Add(time.Hour)})
			return err
		}))
		return ap, created
	}
	first, created := open(live, "a")
	require.True(t, created)
	again, created := open(live, "a")
	require.False(t, created, "a re-run finds the gate it opened")
	require.Equal(t, first.ID, again.ID)
	second, _ := open(other, "b")
	open(rehearsal, rh.Name())

	decide := func(id uuid.UUID, s store.ApprovalStatus, by string) (*store.Approval, bool) {
		var ap *store.Approval
		var settled bool
		require.NoError(t, pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			var err error
			ap, settled, err = store.DecideApproval(ctx, tx, id, s, by, "because")
			return err
		}))
		return ap, settled
	}
	ap, settled := decide(first.ID, store.ApprovalApproved, "alice")
	require.True(t, settled)
	require.Equal(t, "alice", *ap.DecidedBy)
	require.Equal(t, "because", *ap.Reason)
	require.NotNil(t, ap.DecidedAt)
	ap, settled = decide(first.ID, store.ApprovalRejected, "bob")
	require.False(t, settled, "a settled gate is never settled again")
	require.Equal(t, store.ApprovalApproved, ap.Status)
	require.Equal(t, "alice", *ap.DecidedBy)

	byShort, err := store.ApprovalByRef(ctx, f.pool, store.ShortID(second.ID))
	require.NoError(t, err)
	require.Equal(t, second.ID, byShort.ID)
	_, err = store.ApprovalByRef(ctx, f.pool, "0000000z")
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		n, err := store.CancelRunApprovals(ctx, tx, live, "")
		require.Zero(t, n, "a decided gate is not cancelled")
		if err != nil {
			return err
		}
		n, err = store.CancelRunApprovals(ctx, tx, other, "")
		require.EqualValues(t, 1, n)
		return err
	}))

	listed, err := store.ListApprovals(ctx, f.pool, store.ApprovalFilter{})
	require.NoError(t, err)
	require.Len(t, listed, 2, "rehearsal gates are hidden")
	listed, err = store.ListApprovals(ctx, f.pool, store.ApprovalFilter{Rehearsals: true})
	require.NoError(t, err)
	require.Len(t, listed, 3)
	listed, err = store.ListApprovals(ctx, f.pool, store.ApprovalFilter{Workflow: rh.Name()})
	require.NoError(t, err)
	require.Len(t, listed, 1, "naming the rehearsal's workflow shows its gates")
	listed, err = store.ListApprovals(ctx, f.pool, store.ApprovalFilter{Status: store.ApprovalCancelled})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, other, listed[0].RunID)
}
