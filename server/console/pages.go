package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/units"
	"github.com/rflow-dev/rflow/workflow"
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
	f.Namespace = c.cfg.Engine.Namespace()
	runs, err := store.ListRuns(r.Context(), c.cfg.Pool, f)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	wfs, err := store.ListWorkflows(r.Context(), c.cfg.Pool, c.cfg.Engine.Namespace())
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

// stepRow is a journal row with its send's relayer transaction, if any,
// and the links of its River job and its transaction's explorer page.
type stepRow struct {
	*store.StepRun
	Tx       *store.RelayerTx
	TxURL    string
	BlockURL string // the block that mined it
	JobURL   string
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request, sess *session) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": strconv.Quote(r.PathValue("id")) + " is not a run id."})
		return
	}
	d, err := store.LoadRunDetail(r.Context(), c.cfg.Pool, id)
	if err == nil {
		err = c.cfg.Engine.Namespace().LocalRun(d.Run)
	}
	if errors.Is(err, store.ErrNotFound) {
		c.render(w, r, http.StatusNotFound, "error", sess, view{"Message": "There is no run " + id.String() + "."})
		return
	}
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	run := d.Run
	rows, err := c.stepRows(r, run.ID, d.Steps)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	reorgs := make([]reorgRow, len(d.Reorgs))
	for i, rj := range d.Reorgs {
		reorgs[i] = reorgRow{ResponseJournal: rj}
		if reorgs[i].Rows, err = c.stepRows(r, rj.ID, rj.Steps); err != nil {
			c.fail(w, r, sess, err)
			return
		}
	}
	v := view{"Run": run, "Steps": rows, "Trigger": trigger.ABIIntegersAsText(run.TriggerKind, run.Trigger),
		"RetryKey": uuid.NewString(), "Approvals": approvalRows(d.Approvals), "Waits": d.Waits, "Reorgs": reorgs,
		"Timeline": newTimeline(run, rows, d.Waits, d.Approvals, time.Now())}
	if run.ChainID != nil && run.BlockNumber != nil {
		v["TriggerBlockURL"] = c.network(*run.ChainID).ExplorerBlock(*run.BlockNumber)
	}
	c.render(w, r, http.StatusOK, "run", sess, v)
}

// network is the project's network of chainID, or nil.
func (c *Console) network(chainID int64) *workflow.Network {
	for _, n := range c.cfg.Networks {
		if int64(n.ChainID) == chainID {
			return n
		}
	}
	return nil
}

// jobURL is River UI's page of River job id, or "" without River UI.
func (c *Console) jobURL(id int64) string {
	if !c.cfg.RiverUI || id == 0 {
		return ""
	}
	return RiverUIPrefix + "/jobs/" + strconv.FormatInt(id, 10)
}

// reorgRow is an on_reorg response with its compensation journal's rows.
type reorgRow struct {
	store.ResponseJournal
	Rows []stepRow
}

// stepRows are the steps of journal id (a run or an on_reorg response),
// each send with its relayer transaction, each step with its River job.
func (c *Console) stepRows(r *http.Request, id uuid.UUID, steps []*store.StepRun) ([]stepRow, error) {
	var jobs map[string]int64
	if c.cfg.RiverUI && len(steps) > 0 {
		var err error
		if jobs, err = store.StepJobs(r.Context(), c.cfg.Pool, id); err != nil {
			return nil, err
		}
	}
	rows := make([]stepRow, len(steps))
	for i, s := range steps {
		rows[i] = stepRow{StepRun: s, JobURL: c.jobURL(jobs[s.Key])}
		if ext := sendExternalID(s); ext != "" {
			t, err := store.RelayerTxByExternalID(r.Context(), c.cfg.Pool, ext)
			if err != nil && !errors.Is(err, store.ErrRelayerTxNotFound) {
				return nil, err
			}
			rows[i].Tx = t
			if t != nil && t.Hash != nil {
				rows[i].TxURL = c.network(t.ChainID).ExplorerTx(*t.Hash)
			}
			if t != nil && t.MinedBlock != nil {
				rows[i].BlockURL = c.network(t.ChainID).ExplorerBlock(*t.MinedBlock)
			}
		}
	}
	return rows, nil
}

// approvalRow is an approval with the keys its decision forms send and
// what its send moves, for a person.
type approvalRow struct {
	*store.Approval
	ApproveKey, RejectKey string
	Moves                 approvalMoves
}

func approvalRows(aps []*store.Approval) []approvalRow {
	rows := make([]approvalRow, len(aps))
	for i, a := range aps {
		rows[i] = approvalRow{Approval: a, ApproveKey: uuid.NewString(), RejectKey: uuid.NewString(), Moves: movesOf(a.Summary)}
	}
	return rows
}

// approvalMoves is the amounts of an approval's prepared transaction as
// its summary states them for a person: the value in the network's
// currency and the token amounts of a transfer.
type approvalMoves struct {
	Value  string // "0.0292 ETH (29200000000000000 wei)"; "" for a zero value
	To     string
	Tokens []string // "1.5 USDC (1500000)"
}

func movesOf(summary json.RawMessage) approvalMoves {
	var s struct {
		To        string `json:"to"`
		Value     string `json:"value"`
		ValueText string `json:"value_text"`
		Args      []struct {
			Text string `json:"text"`
		} `json:"args"`
	}
	if json.Unmarshal(summary, &s) != nil {
		return approvalMoves{}
	}
	m := approvalMoves{To: s.To}
	if s.Value != "" && s.Value != "0" {
		m.Value = s.ValueText
		if m.Value == "" { // a summary from before value_text
			m.Value = units.Ether().FormatText(s.Value)
		}
	}
	for _, a := range s.Args {
		if a.Text != "" {
			m.Tokens = append(m.Tokens, a.Text)
		}
	}
	return m
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
	aps, err := store.ListApprovals(r.Context(), c.cfg.Pool, store.ApprovalFilter{Status: status, Limit: pageSize, Namespace: c.cfg.Engine.Namespace()})
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
	wfs, err := store.ListWorkflows(r.Context(), c.cfg.Pool, c.cfg.Engine.Namespace())
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	c.render(w, r, http.StatusOK, "workflows", sess, view{"Workflows": wfs})
}
