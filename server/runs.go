package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// startRunRequest is the body of POST /v1/workflows/{name}/runs.
type startRunRequest struct {
	// Input is exposed to the run as trigger.input, exactly as sent.
	Input json.RawMessage `json:"input"`
	// Key is the run's trigger key: a second request with the same key
	// (even after the ledger forgot the Idempotency-Key) returns the first
	// run, and is a conflict when its input differs. Empty means the key
	// derived from the Idempotency-Key (commandRunKey).
	Key string `json:"key"`
	// Body, for a webhook workflow only, is a test delivery: the run
	// starts as if the hook had received this JSON body with no headers
	// (the caller's operate role stands in for the hook's signature). Its
	// key is Key or the Idempotency-Key's, as for a manual run; the
	// trigger's own idempotency_key is not evaluated.
	Body json.RawMessage `json:"body"`
}

// startRunResponse answers a manual run request.
type startRunResponse struct {
	RunID    uuid.UUID `json:"run_id"`
	Workflow string    `json:"workflow"`
	// Duplicate is true when Key already had a run: no run was created and
	// RunID is the existing one.
	Duplicate bool `json:"duplicate"`
}

// commandRunKey is the trigger key of a manual run requested without a
// key: the command's own (canonical) Idempotency-Key, so the run is the
// command's durable identity. A replay after the ledger row expired claims
// the same key and finds the same run; a changed input conflicts.
func commandRunKey(idempotencyKey string) string { return "idempotency-key:" + idempotencyKey }

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.command(w, r, clientRetention, func(ctx context.Context, tx pgx.Tx, cmd commandRequest) (int, any, error) {
		var req startRunRequest
		if aerr := decodeBody(cmd.Body, &req, `a JSON object {"input": …, "key": "…"}`); aerr != nil {
			return 0, nil, aerr
		}
		key := req.Key
		if key == "" {
			key = commandRunKey(cmd.Key)
		}
		claim, aerr := s.runClaim(ctx, name, key, req)
		if aerr != nil {
			return 0, nil, aerr
		}
		id, created, err := s.engine.StartRunTx(ctx, tx, claim)
		if err != nil {
			return 0, nil, err
		}
		status := http.StatusCreated
		if !created {
			status = http.StatusOK
		}
		return status, startRunResponse{RunID: id, Workflow: name, Duplicate: !created}, nil
	})
}

// runClaim is the claim of a requested run: a manual run of a manual
// workflow, or a test delivery (req.Body) of a webhook workflow.
func (s *Server) runClaim(ctx context.Context, name, key string, req startRunRequest) (store.Claim, error) {
	wf, err := s.startableWorkflow(ctx, name)
	if err != nil {
		return store.Claim{}, err
	}
	switch {
	case wf.Trigger.Webhook != nil && req.Body != nil:
		if req.Input != nil {
			return store.Claim{}, &apiError{status: http.StatusBadRequest, code: "bad_request",
				message: fmt.Sprintf("workflow %s has a webhook trigger: send its test delivery as \"body\", not \"input\"", name)}
		}
		payload, err := json.Marshal(trigger.WebhookPayload{Headers: map[string]string{}, Body: req.Body})
		if err != nil {
			return store.Claim{}, fmt.Errorf("webhook %s: encode payload: %w", name, err)
		}
		return store.Claim{Workflow: s.ns.Qualify(name), TriggerKey: key, TriggerKind: trigger.Webhook, Trigger: payload}, nil
	case wf.Trigger.Manual != nil && req.Body == nil:
		return store.ManualClaim(s.ns.Qualify(name), key, req.Input), nil
	case wf.Trigger.Manual != nil:
		return store.Claim{}, &apiError{status: http.StatusBadRequest, code: "bad_request",
			message: fmt.Sprintf("workflow %s has a manual trigger: send its run's data as \"input\"; \"body\" is a webhook workflow's test delivery", name)}
	}
	hint := "its runs come from its trigger"
	if wf.Trigger.Webhook != nil {
		hint = "send its events, signed, to POST /hooks/" + name + ", or a test delivery as {\"body\": …} here"
	}
	return store.Claim{}, &apiError{status: http.StatusConflict, code: "not_manual",
		message: fmt.Sprintf("workflow %s has a %s trigger: this route starts runs of manual workflows only; %s", name, wf.Trigger.Kind, hint)}
}

// startableWorkflow is the compiled current definition of a workflow a run
// is asked of: 404 when it is not deployed, 409 when its definition no
// longer compiles. A run of a trigger other than manual (or a webhook's
// test delivery) is refused by runClaim: the claim gate would otherwise
// start a manual run of it, which skips a webhook's signature and fails an
// event workflow's first read of `event`.
func (s *Server) startableWorkflow(ctx context.Context, name string) (*workflow.Workflow, error) {
	wf, err := s.engine.Workflow(ctx, s.ns.Qualify(name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apiError{status: http.StatusNotFound, code: "not_found",
			message: fmt.Sprintf("no workflow %q is deployed (deploy it with PUT /v1/workflows/%s or rflow workflows deploy)", name, name)}
	}
	if diags, ok := asDiagnostics(err); ok {
		// The current generation no longer compiles: an API deploy made
		// before its ${VAR} rule, or a project that changed under it.
		return nil, &apiError{status: http.StatusConflict, code: "invalid_definition",
			message: fmt.Sprintf("the deployed definition of %s does not compile (%s); deploy a fixed one", name, diags.Error())}
	}
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", name, err)
	}
	return wf, nil
}

// runListResponse is a page of runs, newest first.
type runListResponse struct {
	Runs []*Run `json:"runs"`
	// NextBefore, when set, is the "before" value of the next (older) page.
	NextBefore *uuid.UUID `json:"next_before,omitempty"`
}

const maxListLimit = 1000

// queryLimit reads a list's ?limit= into limit, which keeps its default
// when the parameter is absent.
func queryLimit(q url.Values, limit *int) *apiError {
	v := q.Get("limit")
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return &apiError{status: http.StatusBadRequest, code: "bad_query",
			message: fmt.Sprintf("limit must be a number from 1 to %d", maxListLimit)}
	}
	*limit = n
	return nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.RunFilter{Workflow: q.Get("workflow"), Status: store.RunStatus(q.Get("status")), Limit: 50, Namespace: s.ns}
	if aerr := queryLimit(q, &f.Limit); aerr != nil {
		writeError(w, aerr)
		return
	}
	if v := q.Get("all_projects"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_query", message: "all_projects must be true or false"})
			return
		}
		f.AllProjects = b
	}
	if v := q.Get("compensated"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_query", message: "compensated must be true or false"})
			return
		}
		f.Compensated = b
	}
	if v := q.Get("before"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_query", message: "before must be a run id"})
			return
		}
		f.Before = &id
	}
	if f.Status != "" && !f.Status.Valid() {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_query",
			message: fmt.Sprintf("unknown status %q", f.Status)})
		return
	}
	runs, err := store.ListRuns(r.Context(), s.pool, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := runListResponse{Runs: NewRuns(runs)}
	if len(runs) == f.Limit {
		resp.NextBefore = &runs[len(runs)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

// runResponse answers retry and cancel: the run as the command left it.
type runResponse struct {
	Run *Run `json:"run"`
}

// runDetail is a run with its whole step journal, its wait_for waits and
// the on_reorg responses to its orphaning (when a reorg orphaned its log).
type runDetail struct {
	Run   *Run    `json:"run"`
	Steps []*Step `json:"steps"`
	// Approvals are the run's approval gates, decided or not (who, when, why).
	Approvals []*Approval `json:"approvals"`
	// Waits are the run's wait_for conditions and what matched them.
	Waits  []*store.Wait `json:"waits,omitempty"`
	Reorgs []*Response   `json:"reorg_responses,omitempty"`
	// Repairs: each time a pending step had lost its River job and was
	// enqueued again.
	Repairs []store.Repair `json:"repairs,omitempty"`
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, aerr := runID(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	d, err := store.LoadRunDetail(r.Context(), s.pool, id)
	if err == nil {
		err = s.ns.LocalRun(d.Run)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runDetail{Run: NewRun(d.Run), Steps: NewSteps(d.Steps), Approvals: NewApprovals(d.Approvals),
		Waits: d.Waits, Reorgs: NewResponses(d.Reorgs), Repairs: d.Repairs})
}

// retryRun keeps its durable identity in run_retries: a replay the ledger
// forgot answers with the run it retried (200, as the run is now) instead
// of retrying it a second time after it failed again.
func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	id, aerr := runID(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.command(w, r, clientRetention, func(ctx context.Context, tx pgx.Tx, cmd commandRequest) (int, any, error) {
		prev, err := store.RetryByCommand(ctx, tx, id, cmd.Key)
		switch {
		case err == nil && cmd.same(prev.RequestHash):
			run, err := store.GetRun(ctx, tx, id, false)
			if err == nil {
				err = s.ns.LocalRun(run)
			}
			if err != nil {
				return 0, nil, err
			}
			return http.StatusOK, runResponse{Run: NewRun(run)}, nil
		case err == nil:
			return 0, nil, &apiError{status: http.StatusConflict, code: "idempotency_key_reused",
				message: fmt.Sprintf("Idempotency-Key %q already retried run %s (attempt %d) with a different request; "+
					"use a new key for a new retry", cmd.Key, id, prev.Attempt)}
		case !errors.Is(err, store.ErrNotFound):
			return 0, nil, err
		}
		// A run whose on_reorg response failed is retried through that
		// response, whatever the run's own status (RetryRunTx).
		resp, err := store.FailedResponse(ctx, tx, id)
		if err != nil {
			return 0, nil, err
		}
		run, err := s.actOnRun(ctx, tx, id, func(run *store.Run) *apiError {
			if run.Status != store.RunFailed && resp == nil {
				return &apiError{status: http.StatusConflict, code: "invalid_state",
					message: fmt.Sprintf("run %s is %s: only failed runs can be retried", run.ID, run.Status)}
			}
			return nil
		}, s.engine.RetryRunTx)
		if err != nil {
			return 0, nil, err
		}
		err = store.RecordRetryCommand(ctx, tx, store.RetryCommand{RunID: id, Key: cmd.Key, RequestHash: cmd.Hash, Attempt: run.Attempt})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, runResponse{Run: NewRun(run)}, nil
	})
}

// cancelRun is effect-idempotent: a run already cancelled is answered as it
// is (200), so a repeated cancel, under any key and after the ledger forgot
// it, returns the same run; a run that finished otherwise is 409. An
// optional body {"reason": "…"} is kept as rflow runs cancel --reason
// keeps it (the first reason said stays).
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, aerr := runID(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.command(w, r, deterministicRetention, func(ctx context.Context, tx pgx.Tx, cmd commandRequest) (int, any, error) {
		reason, aerr := readReason(cmd.Body)
		if aerr != nil {
			return 0, nil, aerr
		}
		run, err := s.actOnRun(ctx, tx, id, func(run *store.Run) *apiError {
			if run.Status.Terminal() && run.Status != store.RunCancelled {
				return &apiError{status: http.StatusConflict, code: "invalid_state",
					message: fmt.Sprintf("run %s is already %s", run.ID, run.Status)}
			}
			return nil
		}, func(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*store.Run, error) {
			run, err := s.engine.CancelRunTx(ctx, tx, id)
			if err != nil || reason == "" {
				return run, err
			}
			return store.NoteCancelReason(ctx, tx, id, reason)
		})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, runResponse{Run: NewRun(run)}, nil
	})
}

// actOnRun is the body of retry and cancel: lock the run, check that the
// command applies to its state (409 otherwise), then let the engine act in
// the same transaction.
func (s *Server) actOnRun(ctx context.Context, tx pgx.Tx, id uuid.UUID, check func(*store.Run) *apiError,
	act func(context.Context, pgx.Tx, uuid.UUID) (*store.Run, error)) (*store.Run, error) {
	run, err := store.GetRun(ctx, tx, id, true)
	if err != nil {
		return nil, err
	}
	if err := s.ns.LocalRun(run); err != nil {
		return nil, err
	}
	if aerr := check(run); aerr != nil {
		return nil, aerr
	}
	if run, err = act(ctx, tx, id); err != nil {
		return nil, err
	}
	return run, s.ns.LocalRun(run)
}

func runID(r *http.Request) (uuid.UUID, *apiError) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, &apiError{status: http.StatusBadRequest, code: "bad_run_id",
			message: fmt.Sprintf("%q is not a run id (a uuid)", r.PathValue("id"))}
	}
	return id, nil
}
