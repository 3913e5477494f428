package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// ApprovalNoticeArgs is the job that tells an approval's notifier a send
// waits for a decision. It is inserted with the gate (an outbox): a pending
// approval is announced even if the process dies right after parking.
type ApprovalNoticeArgs struct {
	ApprovalID uuid.UUID `json:"approval_id"`
	Notifier   string    `json:"notifier"`
}

func (ApprovalNoticeArgs) Kind() string { return "rflow.approval_notice" }

func (ApprovalNoticeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: pageMaxAttempts}
}

type approvalNoticeWorker struct {
	river.WorkerDefaults[ApprovalNoticeArgs]
	e *Engine
}

// Work posts the notice: the summary and the commands that decide it. A
// gate decided before the notice goes out needs none.
func (w *approvalNoticeWorker) Work(ctx context.Context, job *river.Job[ApprovalNoticeArgs]) error {
	e := w.e
	ap, err := store.GetApproval(ctx, e.pool, job.Args.ApprovalID, false)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ap.Status != store.ApprovalPending {
		return nil
	}
	sum, err := DecodeApprovalSummary(ap.Summary)
	if err != nil {
		return river.JobCancel(err)
	}
	short := store.ShortID(ap.ID)
	ap.Workflow, _ = e.ns.Local(ap.Workflow) // a notice names the project's own name
	text := fmt.Sprintf("rflow %s: run %s of %s waits for approval of step %s: %s. Expires %s. "+
		"Decide with: rflow approve %s | rflow reject %s --reason '…'",
		e.project.Name, store.ShortID(ap.RunID), ap.Workflow, ap.StepKey, sum.OneLine(),
		ap.ExpiresAt.UTC().Format(time.RFC3339), short, short)
	fields := map[string]any{"event": "approval.pending", "text": text, "project": e.project.Name,
		"approval_id": ap.ID.String(), "run_id": ap.RunID.String(), "workflow": ap.Workflow, "step": ap.StepKey,
		"summary": sum, "expires_at": ap.ExpiresAt.UTC().Format(time.RFC3339),
		"approve": "rflow approve " + short, "reject": "rflow reject " + short + " --reason R",
		"http": map[string]string{"approve": "POST /v1/approvals/" + ap.ID.String() + "/approve",
			"reject": "POST /v1/approvals/" + ap.ID.String() + "/reject"}}
	err = e.page(ctx, job.Args.Notifier, "approval notice "+ap.ID.String(), text, fields,
		map[string]string{"Idempotency-Key": "approval:" + ap.ID.String(), "X-Rflow-Workflow": ap.Workflow})
	if err != nil {
		return err
	}
	e.logger.Info("approval notice sent", "approval", ap.ID, "notifier", job.Args.Notifier)
	return nil
}
