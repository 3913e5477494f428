package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// Approval is an approval gate as the API shows it.
type Approval struct {
	ID       uuid.UUID `json:"id"`
	ShortID  string    `json:"short_id"`
	RunID    uuid.UUID `json:"run_id"`
	Workflow string    `json:"workflow"`
	Step     string    `json:"step"`
	Attempt  int       `json:"attempt"`
	Status   string    `json:"status"`
	// Summary is the prepared transaction: network, chain_id, wallet, to,
	// value (wei), contract, function, args, calldata, confirmations,
	// budget, gas_estimate and simulation.
	Summary   json.RawMessage `json:"summary"`
	OnTimeout string          `json:"on_timeout"`
	ExpiresAt time.Time       `json:"expires_at"`
	CreatedAt time.Time       `json:"created_at"`
	DecidedAt *time.Time      `json:"decided_at,omitempty"`
	DecidedBy *string         `json:"decided_by,omitempty"`
	Reason    *string         `json:"reason,omitempty"`
}

// NewApproval maps a stored approval to its API form.
func NewApproval(a *store.Approval) *Approval {
	if a == nil {
		return nil
	}
	return &Approval{ID: a.ID, ShortID: store.ShortID(a.ID), RunID: a.RunID, Workflow: a.Workflow, Step: a.StepKey,
		Attempt: a.Attempt, Status: string(a.Status), Summary: a.Summary, OnTimeout: a.OnTimeout, ExpiresAt: a.ExpiresAt,
		CreatedAt: a.CreatedAt, DecidedAt: a.DecidedAt, DecidedBy: a.DecidedBy, Reason: a.Reason}
}

// NewApprovals maps a list of approvals; it is never nil.
func NewApprovals(as []*store.Approval) []*Approval {
	out := make([]*Approval, len(as))
	for i, a := range as {
		out[i] = NewApproval(a)
	}
	return out
}

type approvalListResponse struct {
	Approvals []*Approval `json:"approvals"`
}

type approvalResponse struct {
	Approval *Approval `json:"approval"`
}

// decisionRequest is the optional body of POST /v1/approvals/{id}/approve
// and /reject.
type decisionRequest struct {
	// By is accepted for compatibility and ignored: the decider recorded
	// is the name of the token that sent the decision, which a caller
	// cannot choose.
	By     string `json:"by"`
	Reason string `json:"reason"`
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ApprovalFilter{Status: store.ApprovalStatus(q.Get("status")), Workflow: q.Get("workflow"), Limit: 100, Namespace: s.ns}
	if f.Status != "" && !f.Status.Valid() {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_query",
			message: fmt.Sprintf("unknown approval status %q (pending, approved, rejected, expired or cancelled)", f.Status)})
		return
	}
	if v := q.Get("run_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_query", message: "run_id must be a run id (a uuid)"})
			return
		}
		f.RunID = id
	}
	if aerr := queryLimit(q, &f.Limit); aerr != nil {
		writeError(w, aerr)
		return
	}
	aps, err := store.ListApprovals(r.Context(), s.pool, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, approvalListResponse{Approvals: NewApprovals(aps)})
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	ref, aerr := approvalRef(r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	ap, err := store.ApprovalByRef(r.Context(), s.pool, ref)
	if err == nil {
		err = s.ns.LocalApproval(ap)
	}
	if err != nil {
		s.fail(w, r, approvalLookupError(err))
		return
	}
	writeJSON(w, http.StatusOK, approvalResponse{Approval: NewApproval(ap)})
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) }
func (s *Server) reject(w http.ResponseWriter, r *http.Request)  { s.decide(w, r, false) }

// decide is effect-idempotent: the same decision again, under any key and
// after the ledger forgot it, answers 200 with the approval as it is and
// sends nothing more; a conflicting decision or one after the expiry is 409.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	s.command(w, r, clientRetention, func(ctx context.Context, tx pgx.Tx, cmd commandRequest) (int, any, error) {
		var req decisionRequest
		if aerr := decodeBody(cmd.Body, &req, `a JSON object {"by": "…", "reason": "…"}`); aerr != nil {
			return 0, nil, aerr
		}
		ref, aerr := approvalRef(r)
		if aerr != nil {
			return 0, nil, aerr
		}
		ap, err := store.ApprovalByRef(ctx, tx, ref)
		if err == nil {
			err = s.ns.LocalApproval(ap)
		}
		if err != nil {
			return 0, nil, approvalLookupError(err)
		}
		ap, err = s.engine.DecideApprovalTx(ctx, tx, ap.ID, store.ApprovalDecision{Approve: approve, By: principal(r).Name, Reason: req.Reason})
		var conflict *store.ApprovalConflictError
		if errors.As(err, &conflict) {
			return 0, nil, &apiError{status: http.StatusConflict, code: "approval_conflict", message: conflict.Msg,
				details: map[string]any{"approval": NewApproval(conflict.Approval)}}
		}
		if err == nil {
			err = s.ns.LocalApproval(ap)
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, approvalResponse{Approval: NewApproval(ap)}, nil
	})
}

// approvalLookupError maps an ambiguous short id to 409 with the matches.
// approvalRef is the path's approval id, a UUID or its short id; anything
// else is a 400, as a malformed run id is.
func approvalRef(r *http.Request) (string, *apiError) {
	ref := r.PathValue("id")
	if _, err := uuid.Parse(ref); err != nil && !store.IsShortID(ref) {
		return "", &apiError{status: http.StatusBadRequest, code: "bad_approval_id",
			message: fmt.Sprintf("%q is not an approval id (a uuid, or its %d-character short id)", ref, store.ShortIDLen)}
	}
	return ref, nil
}

func approvalLookupError(err error) error {
	var amb *store.AmbiguousShortIDError
	if errors.As(err, &amb) {
		ids := make([]uuid.UUID, len(amb.Matches))
		for i, a := range amb.Matches {
			ids[i] = a.ID
		}
		return &apiError{status: http.StatusConflict, code: "ambiguous_id", message: amb.Error(), details: map[string]any{"matches": ids}}
	}
	return err
}
