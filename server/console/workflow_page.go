package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/store"
)

// recentRuns is how many of its runs a workflow's page lists.
const recentRuns = 10

// runForm is what a workflow's "run it" form sends: the field its JSON
// goes in (a manual run's input, a webhook's test delivery body).
type runForm struct {
	Field, Label, Default string
}

// workflowPage shows a workflow: its state, the definition of its current
// generation (or ?generation=N) as deployed, its latest runs and, for a
// manual or webhook workflow, a form that starts a run.
func (c *Console) workflowPage(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	name := r.PathValue("name")
	row, err := store.GetWorkflow(ctx, c.cfg.Pool, name)
	if errors.Is(err, store.ErrNotFound) {
		c.render(w, r, http.StatusNotFound, "error", sess, view{"Message": "There is no workflow " + name + "."})
		return
	}
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	gen, spec := row.Generation, row.Spec
	if g := r.URL.Query().Get("generation"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil || n < 1 {
			c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "generation must be a positive number."})
			return
		}
		gen = n
		spec, _, err = store.WorkflowSpec(ctx, c.cfg.Pool, name, n)
		if errors.Is(err, store.ErrNotFound) {
			c.render(w, r, http.StatusNotFound, "error", sess, view{"Message": "Workflow " + name + " has no generation " + g + "."})
			return
		}
		if err != nil {
			c.fail(w, r, sess, err)
			return
		}
	}
	def, err := specYAML(spec)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	runs, err := store.ListRuns(ctx, c.cfg.Pool, store.RunFilter{Workflow: name, Limit: recentRuns})
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	rows := make([]runRow, len(runs))
	for i, run := range runs {
		rows[i] = runRow{Run: run}
	}
	v := view{"Workflow": row, "Generation": gen, "Definition": def, "Runs": rows, "RunKey": uuid.NewString()}
	if gen == row.Generation {
		v["Form"] = c.runForm(r, name)
	}
	c.render(w, r, http.StatusOK, "workflow", sess, v)
}

// runForm is the "run it" form of workflow name's current definition, or
// nil when its trigger starts its own runs (or it no longer compiles).
func (c *Console) runForm(r *http.Request, name string) *runForm {
	wf, err := c.cfg.Engine.Workflow(r.Context(), name)
	switch {
	case err != nil:
		c.logger.WarnContext(r.Context(), "console: workflow has no loadable definition", "workflow", name, "err", err)
		return nil
	case wf.Trigger.Manual != nil:
		return &runForm{Field: "input", Label: "Input (JSON, the run's trigger.input; empty for none)", Default: ""}
	case wf.Trigger.Webhook != nil:
		return &runForm{Field: "body", Label: "Test delivery body (JSON, the run's trigger.body; no signature, no headers)", Default: "{}"}
	}
	return nil
}

// maxRunKey is the longest idempotency key the API takes.
const maxRunKey = 255

// runIt starts a run from a workflow page's form: POST
// /v1/workflows/{name}/runs through the command API with the form's
// Idempotency-Key, so a double submit (or a resubmit with the same key)
// is one run, and the browser lands on that run.
func (c *Console) runIt(w http.ResponseWriter, r *http.Request, sess *session) {
	name := r.PathValue("name")
	back := Prefix + "workflows/" + name
	key := strings.TrimSpace(r.PostFormValue("key"))
	if key == "" || len(key) > maxRunKey {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "The idempotency key must be 1 to 255 characters.", "Back": back})
		return
	}
	field := r.PostFormValue("field")
	if field != "input" && field != "body" {
		c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "The form has no run field: reload the page.", "Back": back})
		return
	}
	req := map[string]json.RawMessage{}
	if raw := strings.TrimSpace(r.PostFormValue("data")); raw != "" {
		if !json.Valid([]byte(raw)) {
			c.render(w, r, http.StatusBadRequest, "error", sess, view{"Message": "The " + field + " is not one JSON value.", "Back": back})
			return
		}
		req[field] = json.RawMessage(raw)
	} else if field == "body" {
		req[field] = json.RawMessage("null")
	}
	body, err := json.Marshal(req)
	if err != nil {
		c.fail(w, r, sess, err)
		return
	}
	c.viaAPI(w, r, sess, apiCall{Path: "/v1/workflows/" + url.PathEscape(name) + "/runs", Key: key, Body: body, Back: back,
		Refused: "The run was refused.", Landing: func(resp []byte) string {
			var out struct {
				RunID uuid.UUID `json:"run_id"`
			}
			if json.Unmarshal(resp, &out) != nil || out.RunID == uuid.Nil {
				return back
			}
			return Prefix + "runs/" + out.RunID.String()
		}})
}
