package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// A reorg that orphans a run's triggering log opens a response for (run,
// fork) in the reorg's own transaction, with the job that decides it. The
// run stops at its next step boundary (its steps are held, not executed).
// Once the run's ingestion has passed the fork by the network's depth, the
// response is decided:
//
//   - the log was claimed again meanwhile (the same transaction and the
//     same position in it are back in the canonical chain, wherever they
//     landed, store.ReincludeRuns): the response ends as reincluded and
//     the held steps go on;
//   - otherwise the run is stopped through CancelRun (the single path every
//     cancellation takes) and the workflow's on_reorg: steps run as the
//     response, through the same advance, step worker and fences as a
//     run's steps, in the response's own journal (store.ReorgJournal).
//
// A log that comes back after the decision is handled by lateReinclusion
// (reorg_late.go).

// reorgPoll is how often a pending response checks whether its fork has
// reached the network's depth.
const reorgPoll = 250 * time.Millisecond

// stuckCursorBlocks is how far past a response's decision block the chain's
// head goes before the response is decided without its trigger's cursor:
// the default window (chain.Config), beyond which no rewind re-reads a log.
const stuckCursorBlocks = 256

// ReorgArgs is the River job that decides an on_reorg response and starts
// it.
type ReorgArgs struct {
	ResponseID uuid.UUID `json:"response_id"`
}

// Kind is the River job kind.
func (ReorgArgs) Kind() string { return "rflow.reorg" }

type reorgWorker struct {
	river.WorkerDefaults[ReorgArgs]
	e *Engine
}

// onReorg opens a pending response for each orphaned run of an event
// trigger (the chain service has marked them orphaned_at in the same
// transaction) and enqueues the jobs that decide them.
func (e *Engine) onReorg(ctx context.Context, tx pgx.Tx, r chain.Reorg) error {
	e.logger.Warn("reorg", "chain_id", r.ChainID, "fork_block", r.ForkBlock, "depth", r.Depth, "orphaned_runs", len(r.OrphanedRuns))
	// A replaced chain (fork 0: another genesis) is not this chain: its
	// sends are not sent again there.
	if e.relayer != nil && r.ForkBlock > 0 {
		if _, err := e.relayer.Retrack(ctx, tx, r.ChainID, r.ForkBlock); err != nil {
			return err
		}
	}
	conf := workflow.DefaultConfirmations
	for _, n := range e.project.Networks {
		if int64(n.ChainID) == r.ChainID {
			conf = n.Confirmations
		}
	}
	ids, err := store.OpenResponses(ctx, tx, store.ReorgResponses{ChainID: r.ChainID, ForkBlock: r.ForkBlock, Depth: r.Depth,
		OldHash: r.OldHash, NewHash: r.NewHash, Confirmations: conf}, r.OrphanedRuns)
	if err != nil || len(ids) == 0 {
		return err
	}
	// The chain's reorg is every project's; each response is decided by a
	// process of its run's project, in its queue.
	names, err := store.ResponseWorkflows(ctx, tx, ids)
	if err != nil {
		return err
	}
	jobs := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		jobs[i] = river.InsertManyParams{Args: ReorgArgs{ResponseID: id}, InsertOpts: &river.InsertOpts{Queue: e.queueOf(names[id])}}
	}
	if _, err := e.client.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueue %d reorg response(s): %w", len(ids), err)
	}
	return nil
}

// Work decides a pending response once its fork is deep enough, snoozing
// until then.
func (w *reorgWorker) Work(ctx context.Context, job *river.Job[ReorgArgs]) error {
	e := w.e
	resp, err := store.GetResponse(ctx, e.pool, job.Args.ResponseID, false)
	if errors.Is(err, store.ErrNotFound) || (err == nil && resp.Status != store.RunPending) {
		return nil
	}
	if err != nil {
		return err
	}
	run, err := store.GetRun(ctx, e.pool, resp.RunID, false)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if run.OrphanedAt != nil {
		cursor, head, err := store.DecisionPoint(ctx, e.pool, resp.ChainID, chain.TaskName("event", run.Workflow), phaseOf(run))
		if err != nil {
			return err
		}
		// A cursor that no longer moves (its workflow was removed) would
		// keep the response pending for ever: past a window's length the
		// log cannot be read again anyway.
		if cursor < resp.DecideAt && head < resp.DecideAt+stuckCursorBlocks {
			return river.JobSnooze(reorgPoll)
		}
	}
	return e.decide(ctx, job, resp.ID)
}

// phaseOf is the ingestion phase that claimed a run (its cursor is the one
// that would claim a re-included log again).
func phaseOf(run *store.Run) string {
	var p struct {
		Phase string `json:"phase"`
	}
	_ = json.Unmarshal(run.Trigger, &p)
	if p.Phase == "" {
		return string(chain.PhaseConfirmed)
	}
	return p.Phase
}

// decide ends a pending response, in one transaction with its job's
// completion: reincluded (the held steps get their jobs again) when the run
// is no longer orphaned, else the run is stopped and the response started.
func (e *Engine) decide(ctx context.Context, job *river.Job[ReorgArgs], id uuid.UUID) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		done, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		if err != nil {
			return fmt.Errorf("complete job %d: %w", job.ID, err)
		}
		if done.State != rivertype.JobStateCompleted {
			return nil // rescued: another worker owns it
		}
		resp, err := store.GetResponse(ctx, tx, id, false)
		if err != nil {
			return err
		}
		// The run first, then the response: a re-inclusion (the claim
		// gate) and a hold lock the run row, so they serialise here.
		run, err := store.GetRun(ctx, tx, resp.RunID, true)
		if err != nil {
			return err
		}
		if _, err := store.GetResponse(ctx, tx, id, true); err != nil {
			return err
		}
		if run.OrphanedAt == nil {
			return e.reinclude(ctx, tx, run, resp)
		}
		return e.compensate(ctx, tx, run, resp)
	})
}

// reinclude ends a response whose log came back, and lets the run go on
// from the steps it held.
func (e *Engine) reinclude(ctx context.Context, tx pgx.Tx, run *store.Run, resp *store.Response) error {
	if ok, err := store.EndResponse(ctx, tx, resp.ID, false); err != nil || !ok {
		return err
	}
	held, err := store.ReleaseHeld(ctx, tx, run.ID)
	if err != nil || len(held) == 0 {
		return err
	}
	jobs := make([]river.InsertManyParams, len(held))
	for i, h := range held {
		jobs[i] = e.stepJob(run, h.Key, h.Attempt, nil)
	}
	if _, err := e.client.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("resume run %s after its log was re-included: %w", run.ID, err)
	}
	e.logger.Info("orphaned log re-included; the run goes on", "run", run.ID, "fork_block", resp.ForkBlock)
	return nil
}

// compensate stops the orphaned run (if it is still under way) and starts
// its response at the first on_reorg step, in tx.
func (e *Engine) compensate(ctx context.Context, tx pgx.Tx, run *store.Run, resp *store.Response) error {
	if !run.Status.Terminal() {
		if _, err := CancelRun(ctx, tx, run.ID); err != nil {
			return fmt.Errorf("stop orphaned run %s: %w", run.ID, err)
		}
	}
	if ok, err := store.EndResponse(ctx, tx, resp.ID, true); err != nil || !ok {
		return err
	}
	rrun, journal, err := store.LoadJournal(ctx, tx, store.ReorgJournal, resp.ID)
	if err != nil {
		return err
	}
	p, err := e.plan(ctx, tx, rrun.Workflow, rrun.Generation)
	if err != nil {
		return err
	}
	a, err := e.newAdvance(p, rrun, journal)
	if err != nil {
		return err
	}
	if a.origin, err = e.loadOrigin(ctx, tx, resp.ID); err != nil {
		return err
	}
	if first := p.first(sectionReorg); first != nil {
		err = a.runFrom(ctx, tx, loc{n: first})
	} else {
		err = a.endOfSection(ctx, tx, sectionReorg)
	}
	if err != nil {
		return fmt.Errorf("start reorg response %s: %w", resp.ID, err)
	}
	ok, err := e.flush(ctx, tx, []*advance{a}, false, nil)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("start reorg response %s: %w", resp.ID, errStale)
	}
	e.logger.Warn("orphaned run stopped; on_reorg response started", "run", run.ID, "response", resp.ID,
		"fork_block", resp.ForkBlock, "on_reorg_steps", len(p.wf.OnReorg))
	return nil
}

// hold stops an orphaned run at the step boundary its job reached: the
// step stays queued (or waiting), held, with no job, and the job completes.
// It reports false when the run is no longer orphaned (or has no pending
// response): then nothing was written and the step runs.
func (e *Engine) hold(ctx context.Context, job *river.Job[StepArgs], step *store.StepRun) (bool, error) {
	errNotHeld := errors.New("not held")
	var h store.Hold
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if err := completeStepJob(ctx, tx, job); err != nil {
			return err
		}
		var err error
		if h, err = store.HoldStep(ctx, tx, job.Args.RunID, step.Key, step.Attempt); err != nil {
			return err
		}
		if h == store.NotHeld {
			return errNotHeld // roll the job's completion back: it runs the step
		}
		return nil
	})
	switch {
	case errors.Is(err, errNotHeld):
		return false, nil
	case errors.Is(err, errStale):
		e.stale("hold fenced off", job.Args, "")
		return true, nil
	case err != nil:
		return false, err
	case h == store.HoldStale:
		e.stale("orphaned run moved on", job.Args, "")
		return true, nil
	}
	e.logger.Info("orphaned run held at a step boundary until its reorg is decided", "run", job.Args.RunID, "step", step.Key)
	return true, nil
}

// origin is the orphaned run a response answers, as its expressions see
// it: the run's journal (what it had completed when it stopped) and the
// reorg.
type origin struct {
	run  *store.Run
	resp *store.Response
	rows map[string]*store.StepRun
}

// loadOrigin loads the run a response answers, and its journal.
func (e *Engine) loadOrigin(ctx context.Context, db store.DBTX, responseID uuid.UUID) (*origin, error) {
	resp, err := store.GetResponse(ctx, db, responseID, false)
	if err != nil {
		return nil, err
	}
	run, err := store.GetRun(ctx, db, resp.RunID, false)
	if err != nil {
		return nil, err
	}
	steps, err := store.RunSteps(ctx, db, run.ID)
	if err != nil {
		return nil, err
	}
	o := &origin{run: run, resp: resp, rows: make(map[string]*store.StepRun, len(steps))}
	for _, s := range steps {
		o.rows[s.Key] = s
	}
	return o, nil
}

// addEnv adds what a response sees of its run to env: the newest execution
// of each of the run's top-level steps whatever its status (a step the
// stop cancelled says so), and the reorg.
func (o *origin) addEnv(a *advance, env workflow.Env, steps map[string]any) {
	for id, n := range a.p.nodes {
		if n.section == sectionReorg || n.depth > 0 {
			continue
		}
		for ep := o.run.Epoch; ep >= 0; ep-- {
			if row := o.rows[stepKey(id, nil, ep)]; row != nil {
				var out any
				if len(row.Output) > 0 {
					out, _ = workflow.UnmarshalJSON(row.Output)
				}
				steps[id] = map[string]any{"output": out, "status": string(row.Status)}
				break
			}
		}
	}
	env["reorg"] = map[string]any{
		"chain_id": o.resp.ChainID, "fork_block": o.resp.ForkBlock, "depth": int64(o.resp.Depth),
		"old_hash": o.resp.OldHash, "new_hash": o.resp.NewHash, "run_status": string(o.run.Status),
	}
}

// sendKey is the external id of a send attempt of this advance's run: a
// compensation send carries the run and the fork, so it is distinct per
// (run, fork) and known before the relayer sees it.
func (a *advance) sendKey(step *store.StepRun) string {
	if a.origin != nil {
		return reorgExternalID(a.origin.run.ID, a.origin.resp.ForkBlock, step.Key, step.Attempt)
	}
	return externalID(a.run.ID, step.Key, step.Attempt)
}

// journalOf loads the run or response a send belongs to, with its journal,
// in the send's finalising transaction tx, where the relayer's LockOwner
// (lockSendOwner) has locked it already.
func (e *Engine) journalOf(ctx context.Context, tx pgx.Tx, ref sendRef) (*store.Run, []*store.StepRun, error) {
	id := ref.run
	if ref.journal == store.ReorgJournal {
		resp, err := store.ResponseOf(ctx, tx, ref.run, ref.fork)
		if err != nil {
			return nil, nil, err
		}
		id = resp.ID
	}
	return store.LoadJournal(ctx, tx, ref.journal, id)
}

// lockOwner locks the row that owns a send's journal, the run or its reorg
// response, and returns its id.
func lockOwner(ctx context.Context, tx pgx.Tx, ref sendRef) (uuid.UUID, error) {
	if ref.journal != store.ReorgJournal {
		_, err := store.GetRun(ctx, tx, ref.run, true)
		return ref.run, err
	}
	resp, err := store.ResponseOf(ctx, tx, ref.run, ref.fork)
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := store.GetResponse(ctx, tx, resp.ID, true); err != nil {
		return uuid.Nil, err
	}
	return resp.ID, nil
}

// lockSendOwner is the relayer's LockOwner: a send's finalising
// transaction locks its run (or reorg response) before the send's row,
// the order a cancel takes them in (CancelRun, compensate), so the two
// never deadlock. onTxFinal then reads the journal under that lock.
func lockSendOwner(ctx context.Context, tx pgx.Tx, externalID string) error {
	ref, ok := parseExternalID(externalID)
	if !ok {
		return nil
	}
	if _, err := lockOwner(ctx, tx, ref); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
