package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// execSend hands a send attempt to the relayer. Its idempotency key is made
// from the journaled attempt, so a job re-run after a crash adopts the
// transaction it already queued; the relayer's final hook (onTxFinal)
// settles the step.
func (e *Engine) execSend(ctx context.Context, x *attempt) (outcome, error) {
	if e.relayer == nil {
		return outcome{err: errors.New("send: the project declares no wallets")}, nil
	}
	ext := x.a.sendKey(x.step)
	if x.l.n.step.Send.Approval != nil {
		return e.execGatedSend(ctx, x, ext)
	}
	if x.step.Status == store.StepWaiting {
		return outcome{parked: true}, nil // already handed to the relayer; it resumes the run
	}
	req, err := e.sendRequest(x.l.n.step, x.a.env(x.l), ext)
	if err != nil {
		return outcome{err: err}, nil
	}
	return e.sendNow(ctx, x, req)
}

// sendNow reserves the send's budget and hands req to the relayer.
func (e *Engine) sendNow(ctx context.Context, x *attempt, req relayer.Request) (outcome, error) {
	spend, err := e.budgetSpend(x, req)
	if err != nil {
		return outcome{err: err}, nil
	}
	e.faults.Hit(FaultAfterJournal)
	err = e.parkSend(ctx, x.job, x.a, x.step, req, spend)
	if ex := (*budgets.ExceededError)(nil); errors.As(err, &ex) {
		return outcome{err: ex}, nil // rolled back: nothing reserved, nothing queued
	}
	return outcome{parked: true}, err
}

// budgetSpend is what the send takes from its budget, or nil for a send
// under none. A dry run reaches no wallet and spends nothing.
func (e *Engine) budgetSpend(x *attempt, req relayer.Request) (*budgets.Spend, error) {
	send := x.l.n.step.Send
	if send.Budget == "" || e.dryRun {
		return nil, nil
	}
	wf := x.a.p.wf
	var b *workflow.BudgetRef
	for i := range wf.Budgets {
		if wf.Budgets[i].Name == send.Budget {
			b = &wf.Budgets[i]
		}
	}
	if b == nil {
		return nil, fmt.Errorf("send: budget %s is not declared by workflow %s", send.Budget, wf.Name)
	}
	amt, err := budgets.Amount(*b, send, req.Value, req.Data)
	if err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	return &budgets.Spend{Workflow: budgetOwner(x.run.Workflow), Budget: *b, ExternalID: req.ExternalID, Amount: amt,
		RunID: x.run.ID, StepKey: x.step.Key, Attempt: x.step.Attempt}, nil
}

// sendRequest evaluates a send step into a relayer request.
func (e *Engine) sendRequest(s *workflow.Step, env workflow.Env, id string) (relayer.Request, error) {
	send := s.Send
	req := relayer.Request{ExternalID: id, Wallet: send.Wallet, DryRun: e.dryRun}
	n := e.project.Network(send.Network)
	if n == nil && len(e.project.Networks) == 1 {
		n = e.project.Networks[0]
	}
	if n == nil {
		return req, fmt.Errorf("send: unknown network %q", send.Network)
	}
	req.ChainID = n.ChainID
	req.Confirmations = n.Confirmations
	if send.Confirmations != nil {
		req.Confirmations = *send.Confirmations
	}
	if c := e.project.Contract(send.Contract); c != nil {
		req.To = c.Address
	} else {
		to, err := send.To.String(env)
		if err != nil {
			return req, fmt.Errorf("send to: %w", err)
		}
		if !common.IsHexAddress(to) {
			return req, fmt.Errorf("send to: %q is not an address", to)
		}
		req.To = common.HexToAddress(to)
	}
	if send.Value != nil {
		v, err := send.Value.Eval(env)
		if err != nil {
			return req, fmt.Errorf("send value: %w", err)
		}
		if req.Value, err = workflow.ToBigInt(v); err != nil {
			return req, fmt.Errorf("send value: %w", err)
		}
	}
	switch {
	case send.ABIMethod != nil:
		var err error
		if req.Data, err = send.Calldata(env); err != nil {
			return req, fmt.Errorf("send %s: %w", send.Function, err)
		}
	case send.Data != nil:
		d, err := send.Data.String(env)
		if err != nil {
			return req, fmt.Errorf("send data: %w", err)
		}
		if req.Data, err = hexutil.Decode(d); err != nil {
			return req, fmt.Errorf("send data: %w", err)
		}
	}
	return req, nil
}

// parkSend hands a send to the relayer and parks the run as waiting_tx, in
// one transaction with the job's completion. QueueTx is idempotent on the
// external id: a job re-run after a crash adopts the send it already queued.
// A send under a budget reserves its amount first, in the same transaction
// and after every other check: over the cap it returns the
// *budgets.ExceededError and the transaction (with the job's completion)
// rolls back; queued, the reservation is spent.
func (e *Engine) parkSend(ctx context.Context, job *river.Job[StepArgs], a *advance, step *store.StepRun, req relayer.Request, spend *budgets.Spend) error {
	return e.jobTx(ctx, job, "send fenced off", func(tx pgx.Tx) error {
		if spend != nil {
			if err := budgets.Reserve(ctx, tx, *spend); err != nil {
				return err
			}
			e.faults.Hit(FaultAfterReserve)
		}
		t, _, err := e.relayer.QueueTx(ctx, tx, req)
		if err != nil {
			return err
		}
		if spend != nil {
			if err := budgets.Queued(ctx, tx, req.ExternalID); err != nil {
				return err
			}
		}
		now := time.Now()
		w := &store.Writes{Journal: a.run.Journal}
		w.SettleStep(a.run.ID, step.Key, step.Attempt, store.StepOutcome{
			Status: store.StepWaiting, StartedAt: &now,
			Output: mustJSON(map[string]any{"tx_id": t.TxID.String(), "external_id": req.ExternalID, "status": string(t.Status),
				"value_text": e.project.ChainUnit(req.ChainID).Format(req.Value)}),
		})
		a.status, a.position = store.RunWaitingTx, step.Key
		ok, err := e.flush(ctx, tx, []*advance{a}, false, w)
		if err != nil || !ok {
			return orStale(err)
		}
		return nil
	})
}

// onTxFinal resumes the run parked on a send when the relayer finalises
// it, inside the relayer's transaction: the step completes with the
// receipt (or fails with the reason) and the run moves on atomically. A
// fenced write rolls back to a savepoint, so the relayer's own writes
// still commit.
func (e *Engine) onTxFinal(ctx context.Context, tx pgx.Tx, t *relayer.Transaction) error {
	// The budget settles whatever became of the run: only a confirmed
	// send moved value.
	if err := budgets.Finish(ctx, tx, t.ExternalID, t.Status == relayer.StatusConfirmed); err != nil {
		return err
	}
	ref, ok := parseExternalID(t.ExternalID)
	if !ok {
		return nil // not an engine send
	}
	key, attempt := ref.key, ref.attempt
	run, journal, err := e.journalOf(ctx, tx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if run.Status == store.RunCancelled && run.Journal == store.RunJournal {
		return e.noteCancelledSend(ctx, tx, run.ID, key, attempt, t)
	}
	if run.Status.Terminal() {
		return nil
	}
	step := findStep(journal, key)
	if step == nil || step.Attempt != attempt || step.Status != store.StepWaiting {
		return nil // a stale attempt: its outcome no longer matters
	}
	a, at, err := e.locate(ctx, tx, run, journal, step)
	if err != nil {
		return fmt.Errorf("send %s: %w", t.ExternalID, err)
	}
	out := map[string]any{
		"tx_id": t.TxID.String(), "external_id": t.ExternalID, "hash": t.Hash.Hex(), "block": int64(t.BlockNumber),
		"block_hash": t.BlockHash.Hex(),
		"status":     string(t.Status), "gas_used": int64(t.GasUsed), "from": t.From.Hex(), "to": t.To.Hex(),
		"value": t.Value, "value_text": e.project.ChainUnit(t.ChainID).Format(t.Value), "dry_run": t.DryRun,
	}
	if t.Simulation != nil {
		out["simulation"] = t.Simulation
	}
	o := outcome{output: out, keepOutput: true}
	if t.Status != relayer.StatusConfirmed && t.Status != relayer.StatusSimulated {
		msg := fmt.Sprintf("send %s", t.Status)
		if t.Error != "" {
			msg += ": " + t.Error
		}
		o.err = errors.New(msg)
		o.retryable = sendRetryable(t)
	}
	if a.status == store.RunWaitingTx {
		a.status = store.RunRunning
	}
	ctx, endSpan := e.traceTx(ctx, t)
	defer endSpan()
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	ok, err = e.resumeAt(ctx, sp, a, o, at)
	if err != nil || !ok {
		_ = sp.Rollback(ctx)
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return err
	}
	e.observeSend(step, o)
	return nil
}

// budgetOwner is the workflow whose budgets a run's sends count against:
// its own, and for a replay's run the live workflow it rehearses. A replay
// that sends moves real money, so it takes from the same caps and windows
// as the live runs; a budget of its own would let it spend them again.
func budgetOwner(workflow string) string {
	if r, ok := store.ParseRehearsal(workflow); ok && r.Kind == store.RehearsalReplay {
		return r.Workflow
	}
	return workflow
}
