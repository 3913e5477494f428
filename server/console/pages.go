package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// pageSize is how many runs a list page shows.
const pageSize = 50

// runsPage lists runs newest first, filtered by workflow, status and
// whether an on_reorg response compensated them (?compensated=true), one
// keyset page at a time (?before=<run id>).
func (c *Console) runsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	f := store.RunFilter{Workflow: q.Get("workflow"), Status: store.RunStatus(q.Get("status")), Limit: pageSize,
		Compensated: q.Get("compensated") == "true"}
	if f.Status != "" && !f.Status.Valid() {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "Unknown run status " + strconv.Quote(string(f.Status)) + "."})
		return
	}
	c.listPage(w, r, sess, "runs", f)
}

// dlqPage is the dead letter queue: failed runs, each with a retry button.
func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request, sess *session) {
	c.listPage(w, r, sess, "dlq", store.RunFilter{Workflow: r.URL.Query().Get("workflow"), Status: store.RunFailed, Limit: pageSize})
}

// runRow is a run in a list, with the idempotency key its retry form sends.
type runRow struct {
	*store.Run
	RetryKey string
}

func (c *Console) listPage(w http.ResponseWriter, r *http.Request, sess *session, name string, f store.RunFilter) {
	if v := r.URL.Query().Get("before"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "before must be a run id."})
			return
		}
		f.Before = &id
	}
	runs, err := store.ListRuns(r.Context(), c.cfg.Pool, f)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	wfs, err := store.ListWorkflows(r.Context(), c.cfg.Pool)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	rows := make([]runRow, len(runs))
	for i, run := range runs {
		rows[i] = runRow{Run: run, RetryKey: uuid.NewString()}
	}
	v := view{"Runs": rows, "Workflows": wfs, "Statuses": store.RunStatuses(), "Workflow": f.Workflow, "Status": f.Status,
		"Paged": f.Before != nil, "Compensated": f.Compensated}
	filters := func() url.Values {
		q := url.Values{}
		if f.Workflow != "" {
			q.Set("workflow", f.Workflow)
		}
		if name == "runs" && f.Status != "" {
			q.Set("status", string(f.Status))
		}
		if f.Compensated {
			q.Set("compensated", "true")
		}
		return q
	}
	if len(runs) == f.Limit {
		next := filters()
		next.Set("before", runs[len(runs)-1].ID.String())
		v["Next"] = "?" + next.Encode()
	}
	v["First"] = "?" + filters().Encode()
	c.render(w, r, http.StatusOK, name, sess, v)
}

// stepRow is a journal row with its send's relayer transaction, if any.
type stepRow struct {
	*store.StepRun
	Tx *store.RelayerTx
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, sess *session) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": strconv.Quote(r.PathValue("id")) + " is not a run id."})
		return
	}
	d, err := store.LoadRunDetail(r.Context(), c.cfg.Pool, id)
	if errors.Is(err, store.ErrNotFound) {
		c.render(w, r, http.StatusNotFound, "error", sess, view{"Message": "There is no run " + id.String() + "."})
		return
	}
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	run := d.Run
	rows, err := c.stepRows(r, d.Steps)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	reorgs := make([]reorgRow, len(d.Reorgs))
	for i, rj := range d.Reorgs {
		reorgs[i] = reorgRow{ResponseJournal: rj}
		if reorgs[i].Rows, err = c.stepRows(r, rj.Steps); err != nil {
			c.fail(w, r, sess, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "run", sess, view{"Run": run, "Steps": rows, "Trigger": trigger.ABIIntegersAsText(run.TriggerKind, run.Trigger),
		"RetryKey": uuid.NewString(), "Approvals": approvalRows(d.Approvals), "Waits": d.Waits, "Reorgs": reorgs})
}

// reorgRow is an on_reorg response with its compensation journal's rows.
type reorgRow struct {
	store.ResponseJournal
	Rows []stepRow
}

// stepRows are a journal's steps, each send with its relayer transaction.
func (c *Console) stepRows(r *http.Request, steps []*store.StepRun) ([]stepRow, error) {
	rows := make([]stepRow, len(steps))
	for i, s := range steps {
		rows[i] = stepRow{StepRun: s}
		if ext := sendExternalID(s); ext != "" {
			t, err := store.RelayerTxByExternalID(r.Context(), c.cfg.Pool, ext)
			if err != nil && !errors.Is(err, store.ErrRelayerTxNotFound) {
				return nil, err
			}
			rows[i].Tx = t
		}
	}
	return rows, nil
}

// approvalRow is an approval with the keys its decision forms send.
type approvalRow struct {
	*store.Approval
	ApproveKey, RejectKey string
}

func approvalRows(aps []*store.Approval) []approvalRow {
	rows := make([]approvalRow, len(aps))
	for i, a := range aps {
		rows[i] = approvalRow{Approval: a, ApproveKey: uuid.NewString(), RejectKey: uuid.NewString()}
	}
	return rows
}

// approvalsPage lists approval gates, pending ones by default, each with
// its prepared transaction and, while pending, approve and reject forms.
func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	status := store.ApprovalStatus(r.URL.Query().Get("status"))
	switch {
	case status == "":
		status = store.ApprovalPending
	case status == "all":
		status = ""
	case !status.Valid():
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "Unknown approval status " + strconv.Quote(string(status)) + "."})
		return
	}
	aps, err := store.ListApprovals(r.Context(), c.cfg.Pool, store.ApprovalFilter{Status: status, Limit: pageSize})
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	c.render(w, r, http.StatusOK, "approvals", sess, view{"Approvals": approvalRows(aps), "Status": string(status),
		"Statuses": store.ApprovalStatuses()})
}

// sendExternalID is the relayer key a send step journaled in its output.
func sendExternalID(s *store.StepRun) string {
	if s.Kind != "send" || len(s.Output) == 0 {
		return ""
	}
	var out struct {
		ExternalID string `json:"external_id"`
	}
	if json.Unmarshal(s.Output, &out) != nil {
		return ""
	}
	return out.ExternalID
}

func (c *Console) workflowsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	wfs, err := store.ListWorkflows(r.Context(), c.cfg.Pool)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	c.render(w, r, http.StatusOK, "workflows", sess, view{"Workflows": wfs})
}
