package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// diagnostic is one validation problem, as the API reports it.
type diagnostic struct {
	Position string `json:"position"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// deployWorkflow stores a new definition of a workflow (YAML or JSON body).
// Runs already claimed keep the generation they were claimed under.
func (s *Server) deployWorkflow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.command(w, r, clientRetention, func(ctx context.Context, tx pgx.Tx, cmd commandRequest) (int, any, error) {
		// A deploy's durable identity is its record in workflow_deploys: a
		// replay the ledger forgot answers with what it deployed then
		// (never redeploying an old definition over a newer one), and the
		// key with another definition is still a conflict.
		prev, err := store.DeployByCommand(ctx, tx, s.ns.Qualify(name), cmd.Key)
		switch {
		case err == nil && cmd.same(prev.RequestHash):
			return http.StatusOK, prev.Deployed, nil
		case err == nil:
			return 0, nil, &apiError{status: http.StatusConflict, code: "idempotency_key_reused",
				message: fmt.Sprintf("Idempotency-Key %q already deployed generation %d of %s from a different "+
					"definition; use a new key for a new deploy", cmd.Key, prev.Deployed.Generation, name)}
		case !errors.Is(err, store.ErrNotFound):
			return 0, nil, err
		}
		d, err := s.engine.DeployTx(ctx, tx, name, cmd.Body)
		if err == nil {
			err = store.RecordDeployCommand(ctx, tx, store.DeployCommand{
				Workflow: s.ns.Qualify(name), Key: cmd.Key, RequestHash: cmd.Hash, Deployed: d})
		}
		if err == nil {
			return http.StatusOK, d, nil
		}
		if diags, ok := asDiagnostics(err); ok {
			out := make([]diagnostic, len(diags))
			for i, d := range diags {
				out[i] = diagnostic{Position: d.Pos.String(), Severity: d.Severity.String(), Message: d.Message}
			}
			return 0, nil, &apiError{status: http.StatusUnprocessableEntity, code: "invalid_workflow",
				message: fmt.Sprintf("the workflow definition has %d problem(s), listed in details; nothing was deployed",
					len(diags.Errors())), details: out}
		}
		// Anything else that left the transaction healthy is a problem with
		// the definition (for example a name that does not match the path);
		// a database failure aborts the transaction and is a 500.
		if _, probe := tx.Exec(ctx, `SELECT 1`); probe == nil {
			return 0, nil, &apiError{status: http.StatusUnprocessableEntity, code: "invalid_workflow",
				message: err.Error()}
		}
		return 0, nil, err
	})
}

// asDiagnostics finds the validation diagnostics in err, whether it carries
// workflow.Diagnostics or a pointer to it.
func asDiagnostics(err error) (workflow.Diagnostics, bool) {
	var p *workflow.Diagnostics
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	var v workflow.Diagnostics
	if errors.As(err, &v) {
		return v, true
	}
	return nil, false
}

type workflowListResponse struct {
	Workflows []*Workflow `json:"workflows"`
}

type workflowResponse struct {
	Workflow *Workflow `json:"workflow"`
	// Started counts the runs a resume started: those claimed while the
	// workflow was paused.
	Started *int `json:"started,omitempty"`
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	rows, err := store.ListWorkflows(r.Context(), s.pool, s.ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := workflowListResponse{Workflows: make([]*Workflow, len(rows))}
	for i := range rows {
		out.Workflows[i] = NewWorkflow(&rows[i])
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	row, err := s.workflowRow(r.Context(), s.pool, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, workflowResponse{Workflow: NewWorkflow(row)})
}

// pauseWorkflow and resumeWorkflow are what `rflow workflows pause/resume`
// do. Both are idempotent by effect (a flag; a resume starts only the runs
// still waiting), so they keep the deterministic retention of cancel. A
// pause takes an optional body {"reason": "…"}, as rflow workflows pause
// --reason does (a paused workflow keeps its first reason).
func (s *Server) pauseWorkflow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.command(w, r, deterministicRetention, func(ctx context.Context, tx pgx.Tx, cmd commandRequest) (int, any, error) {
		reason, aerr := readReason(cmd.Body)
		if aerr != nil {
			return 0, nil, aerr
		}
		if err := store.PauseWorkflow(ctx, tx, s.ns.Qualify(name), reason); err != nil {
			return 0, nil, err
		}
		row, err := s.workflowRow(ctx, tx, name)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, workflowResponse{Workflow: NewWorkflow(row)}, nil
	})
}

func (s *Server) resumeWorkflow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.command(w, r, deterministicRetention, func(ctx context.Context, tx pgx.Tx, _ commandRequest) (int, any, error) {
		n, err := s.engine.ResumeWorkflowTx(ctx, tx, s.ns.Qualify(name))
		if err != nil {
			return 0, nil, err
		}
		row, err := s.workflowRow(ctx, tx, name)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, workflowResponse{Workflow: NewWorkflow(row), Started: &n}, nil
	})
}

// workflowRow reads the project's workflow local, under that name.
func (s *Server) workflowRow(ctx context.Context, db store.DBTX, local string) (*store.WorkflowRow, error) {
	row, err := store.GetWorkflow(ctx, db, s.ns.Qualify(local))
	if err != nil {
		return nil, err
	}
	row.Name = local
	return row, nil
}
