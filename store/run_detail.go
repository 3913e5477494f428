package store

import (
	"context"

	"github.com/google/uuid"
)

// RunDetail is everything one run's page shows (`GET /v1/runs/{id}`,
// `rflow runs show`, the console's run page): the run, its journal, its
// approval gates, its wait_for waits and the on_reorg responses to its
// orphaning, each with its own journal.
type RunDetail struct {
	Run       *Run
	Steps     []*StepRun
	Approvals []*Approval
	Waits     []*Wait
	Reorgs    []ResponseJournal
	// Repairs are the times a pending step of the run had lost its River
	// job and was enqueued again (store.JoblessSteps).
	Repairs []Repair
}

// ResponseJournal is an on_reorg response with its compensation steps.
type ResponseJournal struct {
	*Response
	Steps []*StepRun
}

// LoadRunDetail loads a run's detail, or ErrNotFound.
func LoadRunDetail(ctx context.Context, db interface {
	DBTX
	Batcher
}, id uuid.UUID) (*RunDetail, error) {
	run, steps, err := RunWithSteps(ctx, db, id)
	if err != nil {
		return nil, err
	}
	d := &RunDetail{Run: run, Steps: steps}
	if d.Approvals, err = ListApprovals(ctx, db, ApprovalFilter{RunID: id}); err != nil {
		return nil, err
	}
	if d.Waits, err = RunWaits(ctx, db, id); err != nil {
		return nil, err
	}
	if d.Repairs, err = RunRepairs(ctx, db, id); err != nil {
		return nil, err
	}
	rs, err := RunResponses(ctx, db, id)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		steps, err := JournalSteps(ctx, db, ReorgJournal, r.ID)
		if err != nil {
			return nil, err
		}
		d.Reorgs = append(d.Reorgs, ResponseJournal{Response: r, Steps: steps})
	}
	return d, nil
}
