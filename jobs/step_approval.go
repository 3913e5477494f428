package jobs

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/units"
	"github.com/rflow-dev/rflow/workflow"
)

// pausedRecheck is how often an approved send whose workflow is paused
// looks again: it broadcasts only once the workflow is resumed.
const pausedRecheck = 5 * time.Second

// ApprovalSummary is the prepared transaction of an approval-gated send, as
// the approver sees it and exactly as an approved send broadcasts it: the
// request is built once, when the gate opens, and never re-evaluated.
type ApprovalSummary struct {
	Network string `json:"network"`
	ChainID uint64 `json:"chain_id"`
	Wallet  string `json:"wallet"`
	To      string `json:"to"`
	Value   string `json:"value"` // wei, decimal
	// ValueText is Value for a person, in the network's currency:
	// "0.0292 ETH (29200000000000000 wei)".
	ValueText     string              `json:"value_text,omitempty"`
	Contract      string              `json:"contract,omitempty"`
	Function      string              `json:"function,omitempty"`
	Args          []ApprovalArg       `json:"args,omitempty"`
	Calldata      string              `json:"calldata,omitempty"`
	Confirmations int                 `json:"confirmations"`
	Budget        string              `json:"budget,omitempty"`
	GasEstimate   uint64              `json:"gas_estimate,omitempty"`
	Simulation    *relayer.Simulation `json:"simulation,omitempty"`
	// SimulationError says why there is no simulation (the node did not
	// answer when the gate opened).
	SimulationError string `json:"simulation_error,omitempty"`
}

// ApprovalArg is one decoded argument of a gated contract call.
type ApprovalArg struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
	// Text is Value for a person where it is a token amount (the amount
	// of a transfer, transferFrom or approve on a contract with token:).
	Text string `json:"text,omitempty"`
}

// request rebuilds the relayer request the summary describes.
func (s *ApprovalSummary) request(externalID string, dryRun bool) (relayer.Request, error) {
	req := relayer.Request{ExternalID: externalID, Wallet: s.Wallet, ChainID: s.ChainID, To: common.HexToAddress(s.To),
		Confirmations: s.Confirmations, DryRun: dryRun}
	v, ok := new(big.Int).SetString(s.Value, 10)
	if !ok {
		return req, fmt.Errorf("approval summary: value %q is not an integer", s.Value)
	}
	req.Value = v
	if s.Calldata != "" {
		d, err := hexutil.Decode(s.Calldata)
		if err != nil {
			return req, fmt.Errorf("approval summary: calldata: %w", err)
		}
		req.Data = d
	}
	return req, nil
}

// OneLine is the summary as one line of text (notifications, listings).
func (s *ApprovalSummary) OneLine() string {
	what := fmt.Sprintf("send %s to %s", s.valueText(), s.To)
	if s.Function != "" {
		what = fmt.Sprintf("call %s.%s(", s.Contract, s.Function)
		for i, a := range s.Args {
			if i > 0 {
				what += ", "
			}
			if a.Text != "" {
				what += a.Text
			} else {
				what += a.Value
			}
		}
		what += ")"
		if s.Value != "0" {
			what += " with " + s.valueText()
		}
	}
	what += fmt.Sprintf(" from %s on %s", s.Wallet, s.Network)
	if s.SimulationError != "" {
		what += " (" + s.SimulationError + ")"
	} else if s.Simulation != nil && s.Simulation.Failed() {
		what += " (simulation: " + s.Simulation.Reason() + ")"
	} else if s.GasEstimate > 0 {
		what += fmt.Sprintf(" (gas ~%d)", s.GasEstimate)
	}
	return what
}

// valueText is the value for a person; a summary from before value_text
// shows it in ETH.
func (s *ApprovalSummary) valueText() string {
	if s.ValueText != "" {
		return s.ValueText
	}
	return units.Ether().FormatText(s.Value)
}

// DecodeApprovalSummary decodes an approval row's summary.
func DecodeApprovalSummary(raw []byte) (*ApprovalSummary, error) {
	var s ApprovalSummary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("approval summary: %w", err)
	}
	return &s, nil
}

// execGatedSend is a send with approval:. The first attempt to reach it
// evaluates required:; when a gate is needed it prepares the transaction,
// simulates it and parks the run on an approval row (openGate). Later jobs
// of the same attempt (the decision's, the expiry's) read the row: an
// approved gate sends exactly the prepared transaction, after the
// rechecks; a rejected or expired one fails the step and sends nothing.
func (e *Engine) execGatedSend(ctx context.Context, x *attempt, ext string) (outcome, error) {
	ap, err := store.ApprovalFor(ctx, e.pool, x.run.ID, x.step.Key, x.step.Attempt)
	if errors.Is(err, store.ErrNotFound) {
		if x.step.Status == store.StepWaiting {
			return outcome{parked: true}, nil // required: was false and the send is with the relayer
		}
		return e.reachGate(ctx, x, ext)
	}
	if err != nil {
		return outcome{}, err
	}
	if ap.Status == store.ApprovalPending {
		if wait := time.Until(ap.ExpiresAt); wait > 0 {
			// A job early for the expiry (a rescue): wait for it, or
			// for a decision, which enqueues its own job.
			return outcome{}, river.JobSnooze(wait)
		}
		if ap, err = e.expireGate(ctx, ap); err != nil {
			return outcome{}, err
		}
	}
	switch {
	case ap.Status == store.ApprovalApproved, ap.Status == store.ApprovalExpired && ap.OnTimeout == "proceed":
		return e.sendApproved(ctx, x, ext, ap)
	case ap.Status == store.ApprovalRejected:
		msg := "approval rejected"
		if ap.DecidedBy != nil {
			msg += " by " + *ap.DecidedBy
		}
		if ap.Reason != nil {
			msg += ": " + *ap.Reason
		}
		return outcome{err: errors.New(msg + "; nothing was sent")}, nil
	case ap.Status == store.ApprovalExpired:
		return outcome{err: fmt.Errorf("approval %s expired at %s unanswered (on_timeout: reject); nothing was sent",
			ap.ID, ap.ExpiresAt.UTC().Format(time.RFC3339))}, nil
	}
	return outcome{parked: true}, nil // cancelled with its run: the worker fences the rest
}

// reachGate evaluates required: and either sends at once or opens the gate.
func (e *Engine) reachGate(ctx context.Context, x *attempt, ext string) (outcome, error) {
	s := x.l.n.step
	env := x.a.env(x.l)
	if r := s.Send.Approval.Required; r != nil {
		need, err := r.Bool(env)
		if err != nil {
			return outcome{err: fmt.Errorf("approval required: %w", err)}, nil
		}
		if !need {
			req, err := e.sendRequest(s, env, ext)
			if err != nil {
				return outcome{err: err}, nil
			}
			return e.sendNow(ctx, x, req)
		}
	}
	req, err := e.sendRequest(s, env, ext)
	if err != nil {
		return outcome{err: err}, nil
	}
	return outcome{parked: true}, e.openGate(ctx, x, e.summarize(ctx, s, req))
}

// summarize describes a prepared send for its approver, with what a
// simulation against the latest state says it would do.
func (e *Engine) summarize(ctx context.Context, s *workflow.Step, req relayer.Request) *ApprovalSummary {
	send := s.Send
	sum := &ApprovalSummary{Network: send.Network, ChainID: req.ChainID, Wallet: req.Wallet, To: req.To.Hex(),
		Value: "0", Contract: send.Contract, Function: send.Function, Confirmations: req.Confirmations, Budget: send.Budget}
	if sum.Network == "" {
		if n := e.project.Networks; len(n) == 1 {
			sum.Network = n[0].Name
		}
	}
	if req.Value != nil {
		sum.Value = req.Value.String()
	}
	sum.ValueText = e.project.NativeUnit(sum.Network).FormatText(sum.Value)
	if len(req.Data) > 0 {
		sum.Calldata = hexutil.Encode(req.Data)
	}
	if m := send.ABIMethod; m != nil && len(req.Data) >= 4 {
		vals, err := m.Inputs.UnpackValues(req.Data[4:])
		if err == nil {
			for i, in := range m.Inputs {
				sum.Args = append(sum.Args, ApprovalArg{Name: in.Name, Type: in.Type.String(), Value: argText(vals[i])})
			}
			e.tokenAmountText(send, sum.Args)
		}
	}
	sim, err := e.relayer.Simulate(ctx, req)
	if err != nil {
		// The node did not answer: the approver still sees the
		// transaction, and an approved send is simulated again anyway.
		sum.SimulationError = "simulation unavailable: " + redact.Text(err.Error())
		return sum
	}
	sum.Simulation, sum.GasEstimate = sim, sim.GasEstimate
	return sum
}

// tokenAmountText shows the token amounts among a call's arguments in the
// token's unit, where the project file declares it (token: on the called
// contract): the argument a budget on the token counts (the last of
// transfer, transferFrom, approve) and any uint256 named amount, value or
// wad (mint, burn, deposit, withdraw and the like).
func (e *Engine) tokenAmountText(send *workflow.Send, args []ApprovalArg) {
	c := e.project.Contract(send.Contract)
	if c == nil || c.Token == nil {
		return
	}
	for i := range args {
		a := &args[i]
		if a.Type != "uint256" {
			continue
		}
		counted := i == len(args)-1 && (send.Function == "transfer" || send.Function == "transferFrom" || send.Function == "approve")
		switch strings.ToLower(strings.TrimLeft(a.Name, "_")) {
		case "amount", "value", "wad":
			counted = true
		}
		if counted {
			a.Text = c.Token.FormatText(a.Value)
		}
	}
}

func argText(v any) string {
	switch t := v.(type) {
	case common.Address:
		return t.Hex()
	case []byte:
		return "0x" + hex.EncodeToString(t)
	case [32]byte:
		return "0x" + hex.EncodeToString(t[:])
	}
	return fmt.Sprint(v)
}

// openGate parks the run on a new approval row, in one transaction with the
// job's completion: the row (summary, expiry), the step waiting, the run
// waiting_approval, the job that settles the gate at its expiry and the
// notice to the approval's notifier. A job re-run after a crash finds the
// row (CreateApproval returns it) and writes nothing twice.
func (e *Engine) openGate(ctx context.Context, x *attempt, sum *ApprovalSummary) error {
	gate := x.l.n.step.Send.Approval
	summary, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("approval summary: %w", err)
	}
	return e.jobTx(ctx, x.job, "approval gate fenced off", func(tx pgx.Tx) error {
		ap, created, err := store.CreateApproval(ctx, tx, store.Approval{
			ID: uuid.New(), RunID: x.run.ID, StepKey: x.step.Key, Attempt: x.step.Attempt, Workflow: x.run.Workflow,
			StepID: x.l.n.step.ID, Summary: summary, OnTimeout: gate.OnTimeout, ExpiresAt: time.Now().Add(gate.Timeout),
		})
		if err != nil {
			return err
		}
		now := time.Now()
		w := &store.Writes{}
		w.SettleStep(x.run.ID, x.step.Key, x.step.Attempt, store.StepOutcome{
			Status: store.StepWaiting, StartedAt: &now, WakeAt: &ap.ExpiresAt,
			Output: mustJSON(map[string]any{"approval_id": ap.ID.String(), "approval": string(ap.Status),
				"expires_at": ap.ExpiresAt.UTC().Format(time.RFC3339)}),
		})
		a := x.a
		a.status, a.position = store.RunWaitingApproval, x.step.Key
		ok, err := e.flush(ctx, tx, []*advance{a}, false, w)
		if err != nil || !ok {
			return orStale(err)
		}
		if !created {
			return nil
		}
		jobs := []river.InsertManyParams{e.stepJob(x.run, x.step.Key, x.step.Attempt, &ap.ExpiresAt)}
		if gate.Notify != "" {
			// A rehearsal's notice goes to its own queue, as its steps do.
			jobs = append(jobs, river.InsertManyParams{Args: ApprovalNoticeArgs{ApprovalID: ap.ID, Notifier: gate.Notify},
				InsertOpts: &river.InsertOpts{Queue: e.queueOf(x.run.Workflow)}})
		}
		if _, err := e.client.InsertManyTx(ctx, tx, jobs); err != nil {
			return fmt.Errorf("approval %s: enqueue its expiry: %w", ap.ID, err)
		}
		e.logger.Info("send waits for approval", "run", x.run.ID, "step", x.step.Key, "approval", ap.ID,
			"expires_at", ap.ExpiresAt)
		return nil
	})
}

// expireGate settles a pending gate whose expiry passed. It commits on its
// own: the decision is durable before anything follows from it, so a crash
// after it resumes with the same decision.
func (e *Engine) expireGate(ctx context.Context, ap *store.Approval) (*store.Approval, error) {
	var out *store.Approval
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		out, _, err = store.DecideApproval(ctx, tx, ap.ID, store.ApprovalExpired, "timeout", "on_timeout: "+ap.OnTimeout)
		return err
	})
	return out, err
}

// sendApproved broadcasts the transaction an approver saw, once: a send
// already with the relayer (a later job of the attempt, or one re-run after
// a crash) is adopted. Before the hand-off it rechecks what may have
// changed while the gate waited: the workflow must not be paused (the send
// waits for the resume), and a fresh simulation must not revert (the step
// fails with the reason and nothing is sent). The run being cancelled is
// fenced by the step worker and by parkSend's writes; the budget reserves
// its amount at the hand-off, against the cap as it stands then.
func (e *Engine) sendApproved(ctx context.Context, x *attempt, ext string, ap *store.Approval) (outcome, error) {
	if _, err := e.relayer.Get(ctx, ext); err == nil {
		return outcome{parked: true}, nil
	} else if !errors.Is(err, relayer.ErrNotFound) {
		return outcome{}, err
	}
	wf, err := store.GetWorkflow(ctx, e.pool, x.run.Workflow)
	switch {
	case errors.Is(err, store.ErrNotFound): // a namespaced (test, replay) run: no pause flag
	case err != nil:
		return outcome{}, err
	case wf.Paused:
		return outcome{}, river.JobSnooze(pausedRecheck)
	}
	sum, err := DecodeApprovalSummary(ap.Summary)
	if err != nil {
		return outcome{err: err}, nil
	}
	req, err := sum.request(ext, e.dryRun)
	if err != nil {
		return outcome{err: err}, nil
	}
	e.faults.Hit(FaultBeforeResimulate)
	sim, err := e.relayer.Simulate(ctx, req)
	if err != nil {
		return outcome{}, fmt.Errorf("approved send: re-simulate: %w", err)
	}
	if sim.Failed() {
		return outcome{output: map[string]any{"approval_id": ap.ID.String(), "simulation": sim},
			err:        fmt.Errorf("approved send fails re-simulation: %s; nothing was sent", sim.Reason()),
			keepOutput: true}, nil
	}
	return e.sendNow(ctx, x, req)
}

// DecideApprovalTx settles a pending approval with an operator's decision,
// in tx, and enqueues the job that acts on it (sends, or fails the step).
// The same decision again is answered with the approval as it is and
// changes nothing (no second job, no second send); a different decision
// after the first, or any decision after the expiry, is an
// *store.ApprovalConflictError, as is a live engine's decision of a
// rehearsal's gate (rehearsalGate). It needs an engine only for its River
// client.
func (e *Engine) DecideApprovalTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, d store.ApprovalDecision) (*store.Approval, error) {
	ap, err := store.GetApproval(ctx, tx, id, true)
	if err != nil {
		return nil, err
	}
	if err := e.rehearsalGate(ap); err != nil {
		return nil, err
	}
	want := store.ApprovalRejected
	if d.Approve {
		want = store.ApprovalApproved
	}
	switch {
	case ap.Status == want:
		return ap, nil
	case ap.Status != store.ApprovalPending:
		msg := fmt.Sprintf("approval %s is already %s", ap.ID, ap.Status)
		if ap.DecidedBy != nil {
			msg += " by " + *ap.DecidedBy
		}
		if ap.DecidedAt != nil {
			msg += " at " + ap.DecidedAt.UTC().Format(time.RFC3339)
		}
		return nil, &store.ApprovalConflictError{Approval: ap, Msg: msg + "; it cannot be " + string(want)}
	case !time.Now().Before(ap.ExpiresAt):
		return nil, &store.ApprovalConflictError{Approval: ap, Msg: fmt.Sprintf(
			"approval %s expired at %s (on_timeout: %s); it can no longer be decided",
			ap.ID, ap.ExpiresAt.UTC().Format(time.RFC3339), ap.OnTimeout)}
	}
	run, err := store.GetRun(ctx, tx, ap.RunID, true)
	if err != nil {
		return nil, err
	}
	if run.Status.Terminal() {
		return nil, &store.ApprovalConflictError{Approval: ap, Msg: fmt.Sprintf(
			"approval %s belongs to run %s, which is %s: there is nothing left to decide", ap.ID, run.ID, run.Status)}
	}
	ap, _, err = store.DecideApproval(ctx, tx, ap.ID, want, d.By, d.Reason)
	if err != nil {
		return nil, err
	}
	job := e.stepJob(run, ap.StepKey, ap.Attempt, nil)
	if _, err := e.client.InsertManyTx(ctx, tx, []river.InsertManyParams{job}); err != nil {
		return nil, fmt.Errorf("approval %s: enqueue the decision: %w", ap.ID, err)
	}
	return ap, nil
}

// rehearsalGate refuses the decision of a gate whose run this engine does
// not own: a replay's or a test's, decided from a live process (rflow
// approve, the API, the console). Its next job would go to the
// rehearsal's own queue or River schema, which only that rehearsal works:
// once the replay has ended (it ends when its runs park) the job would
// wait there for good, leaving a decided gate's run parked, or be taken
// by a later replay of the same session. A rehearsal's gate is one of its
// findings: it stays pending, the rehearsal settles it by its on_timeout
// if it still runs at the expiry, and prune removes it.
func (e *Engine) rehearsalGate(ap *store.Approval) error {
	r, ok := store.ParseRehearsal(ap.Workflow)
	if !ok || e.owns(ap.Workflow) {
		return nil
	}
	msg := fmt.Sprintf("approval %s belongs to run %s of %s session %s (workflow %s), and a rehearsal's gate is not decided "+
		"from a live process: its run's next job would wait in the rehearsal's own queue, which only that %s works",
		ap.ID, ap.RunID, r.Kind, r.Session, ap.Workflow, r.Kind)
	switch r.Kind {
	case store.RehearsalReplay:
		msg += fmt.Sprintf("; the gate stays pending (the replay settles it by on_timeout if it still runs at %s); "+
			"remove the session with rflow replay prune --session %s", ap.ExpiresAt.UTC().Format(time.RFC3339), r.Session)
	default:
		msg += "; remove what a killed test session left with rflow replay prune --all"
	}
	return &store.ApprovalConflictError{Approval: ap, Msg: msg}
}
