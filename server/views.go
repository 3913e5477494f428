package server

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// Run is a run as the API shows it (and `rflow runs … -o json`). It is the
// API's own type, mapped from store.Run, so a column change in the store is
// not an API change: change this only together with docs/openapi.yaml.
type Run struct {
	ID uuid.UUID `json:"id"`
	// Project is the run's project, in listings of every project only
	// (GET /v1/runs?all_projects=true, runs list --all-projects).
	Project     string          `json:"project,omitempty"`
	Workflow    string          `json:"workflow"`
	Generation  int64           `json:"generation"`
	Attempt     int             `json:"attempt"`
	TriggerKey  string          `json:"trigger_key"`
	TriggerKind string          `json:"trigger_kind"`
	Trigger     json.RawMessage `json:"trigger"`
	Status      string          `json:"status"`
	Position    *string         `json:"position,omitempty"`
	Error       *string         `json:"error,omitempty"`
	FailedStep  *string         `json:"failed_step,omitempty"`
	ChainID     *int64          `json:"chain_id,omitempty"`
	BlockNumber *int64          `json:"block_number,omitempty"`
	OrphanedAt  *time.Time      `json:"orphaned_at,omitempty"`
	WakeAt      *time.Time      `json:"wake_at,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	// CancelReason is what the operator said when cancelling the run.
	CancelReason *string `json:"cancel_reason,omitempty"`
}

// NewRun maps a stored run to its API form.
func NewRun(r *store.Run) *Run {
	if r == nil {
		return nil
	}
	return &Run{
		ID: r.ID, Project: r.Project, Workflow: r.Workflow, Generation: r.Generation, Attempt: r.Attempt,
		TriggerKey: r.TriggerKey, TriggerKind: string(r.TriggerKind), Trigger: trigger.ABIIntegersAsText(r.TriggerKind, r.Trigger), Status: string(r.Status),
		Position: r.Position, Error: r.Error, FailedStep: r.FailedStep, ChainID: r.ChainID, BlockNumber: r.BlockNumber,
		OrphanedAt: r.OrphanedAt, WakeAt: r.WakeAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		CancelReason: r.CancelReason,
	}
}

// NewRuns maps a list of stored runs; it is never nil (an empty list is
// `[]` in JSON).
func NewRuns(rs []*store.Run) []*Run {
	out := make([]*Run, len(rs))
	for i, r := range rs {
		out[i] = NewRun(r)
	}
	return out
}

// Step is one journal row as the API shows it.
type Step struct {
	RunID      uuid.UUID       `json:"run_id"`
	Key        string          `json:"step_key"`
	StepID     string          `json:"step_id"`
	Kind       string          `json:"kind"`
	Attempt    int             `json:"attempt"`
	Status     string          `json:"status"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *string         `json:"error,omitempty"`
	WakeAt     *time.Time      `json:"wake_at,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// NewSteps maps a run's journal; it is never nil.
func NewSteps(ss []*store.StepRun) []*Step {
	out := make([]*Step, len(ss))
	for i, s := range ss {
		out[i] = &Step{
			RunID: s.RunID, Key: s.Key, StepID: s.StepID, Kind: s.Kind, Attempt: s.Attempt, Status: string(s.Status),
			Input: s.Input, Output: s.Output, Error: s.Error, WakeAt: s.WakeAt,
			CreatedAt: s.CreatedAt, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
		}
	}
	return out
}

// Workflow is a deployed workflow as the API shows it (and `rflow
// workflows ls -o json`).
type Workflow struct {
	Name         string     `json:"name"`
	Generation   int64      `json:"generation"`
	SpecHash     string     `json:"spec_hash"`
	Paused       bool       `json:"paused"`
	PausedAt     *time.Time `json:"paused_at,omitempty"`
	PausedReason string     `json:"paused_reason,omitempty"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// NewWorkflow maps a stored workflow to its API form.
func NewWorkflow(w *store.WorkflowRow) *Workflow {
	return &Workflow{Name: w.Name, Generation: w.Generation, SpecHash: w.SpecHash, Paused: w.Paused,
		PausedAt: w.PausedAt, PausedReason: w.PausedReason, UpdatedAt: w.UpdatedAt}
}

// Response is an on_reorg response as the API shows it: what rflow did
// about a run whose triggering log a reorg orphaned, with its own step
// journal (the compensation steps).
type Response struct {
	ID         uuid.UUID  `json:"id"`
	RunID      uuid.UUID  `json:"run_id"`
	ChainID    int64      `json:"chain_id"`
	ForkBlock  int64      `json:"fork_block"`
	Depth      int        `json:"depth"`
	OldHash    string     `json:"old_hash,omitempty"`
	NewHash    string     `json:"new_hash,omitempty"`
	DecideAt   int64      `json:"decide_at"`
	Status     string     `json:"status"`
	Error      *string    `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ReincludedAt: the log came back after the response was decided.
	ReincludedAt *time.Time `json:"reincluded_at,omitempty"`
	Steps        []*Step    `json:"steps"`
}

// NewResponses is the view of a run's on_reorg responses with their
// journals, oldest first; it is never nil.
func NewResponses(rs []store.ResponseJournal) []*Response {
	out := make([]*Response, len(rs))
	for i, r := range rs {
		out[i] = &Response{ID: r.ID, RunID: r.RunID, ChainID: r.ChainID, ForkBlock: r.ForkBlock, Depth: r.Depth,
			OldHash: r.OldHash, NewHash: r.NewHash, DecideAt: r.DecideAt, Status: string(r.Status), Error: r.Error,
			CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, ReincludedAt: r.ReincludedAt,
			Steps: NewSteps(r.Steps)}
	}
	return out
}
