package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// Inline continuation: a run carried by one job.
//
// A step job whose settle creates exactly one successor, due now and of a
// kind that runs in process (stepKind.inline: http_call, notify), journals
// the successor's row as usual but inserts no River job for it: the row
// records the job that carries it (step_runs.carrier_job) and the same Work
// call goes straight on to the successor with the run and journal it just
// wrote under the attempt fence. Each carried step is settled, fenced and
// observed exactly as a job of its own would be; what it saves is the job's
// insert, River's fetch and completion of it, and the journal read before
// the effect. Carrying ends when the run ends or parks, at a successor that
// is not inline, at the cap (Config.InlineCap), when River's deadline for
// the job would not cover the next step's own timeout, or when the engine
// is stopping: then the successor gets its job in its settle's transaction,
// as without carrying.
//
// Crash safety: the carrier stays running in River while it carries, so a
// process that dies leaves it to the dead-node rescue (or River's stuck-job
// rescuer); the rescued job finds its own step settled, looks in the
// journal it has just read for the step it carries (store.StepRun.Carried)
// and continues with that. Work returning an error is retried the same
// way. A carrier never returns leaving a carried step without a live job:
// if it decides after a settle not to go on (its context ended, the engine
// is stopping) it hands the step over (store.HandOverStep and the step's
// own job, one transaction). The repair scan counts a carrier that is not
// completed as the carried step's job.
const defaultInlineCap = 100

// carrier is the River job carrying a run's steps, and how far it may.
type carrier struct {
	job *river.Job[StepArgs]
	// deadline is River's deadline for the job (zero: none): a step is
	// carried only when its own job timeout fits before it.
	deadline time.Time
	left     int // steps it may still carry
}

func (e *Engine) newCarrier(ctx context.Context, job *river.Job[StepArgs]) *carrier {
	if e.inlineCap == 0 {
		return nil
	}
	c := &carrier{job: job, left: e.inlineCap}
	c.deadline, _ = ctx.Deadline()
	return c
}

// carriedStep is a step a carrier goes on to, with the run and journal as
// its settle left them, and the job args it is worked under (the
// carrier's row, the carried step's key and attempt).
type carriedStep struct {
	job     *river.Job[StepArgs]
	run     *store.Run
	journal []*store.StepRun
	step    *store.StepRun
}

// carriedJob is job seen as the job of its carried step key: the same River
// row (completing it, fencing on it), with the step's args.
func carriedJob(job *river.Job[StepArgs], key string) *river.Job[StepArgs] {
	args := job.Args
	args.StepKey, args.Attempt = key, 1
	return &river.Job[StepArgs]{JobRow: job.JobRow, Args: args}
}

// pickCarried decides, in flush before the writes go out, whether the job
// settling this advance carries the one successor it parked: then that
// successor's row names the carrier and its job is not inserted.
func (a *advance) pickCarried() {
	c := a.carry
	if c == nil || len(a.jobs) != 1 || len(a.foreach) > 0 || a.run.Journal != store.RunJournal {
		return
	}
	if !a.jobs[0].InsertOpts.ScheduledAt.IsZero() {
		return
	}
	key := stepKeyOf(a.jobs[0].Args)
	id, items, _, err := parseKey(key)
	n := a.p.nodes[id]
	if err != nil || n == nil || len(items) > 0 || !a.e.kindOf(n.step.Kind).inline {
		return
	}
	if c.left <= 0 || a.e.stopping.Load() || !a.e.carryOK.Load() {
		return
	}
	if !c.deadline.IsZero() && time.Until(c.deadline) < a.e.stepJobTimeout(n.step) {
		return // River would cancel the carrier within the step's own timeout
	}
	row := a.rows[key]
	if row == nil || row.Status != store.StepQueued || row.WakeAt != nil {
		return
	}
	for i := range a.newSteps {
		if a.newSteps[i].Key == key {
			a.newSteps[i].Carrier = &c.job.ID
			row.CarrierJob = &c.job.ID
			a.jobs, a.carrying = nil, key
			return
		}
	}
}

// carried returns the step this advance's settle left to its carrier, or
// nil: called once the settle has committed.
func (a *advance) carried() *carriedStep {
	if a.carrying == "" || !a.created {
		return nil
	}
	run := *a.run
	run.Status, run.Epoch, run.Error, run.FailedStep, run.WakeAt = a.status, a.epoch, a.errMsg, a.failedStep, a.wakeAt
	run.Position = nil
	if a.position != "" {
		run.Position = ptr(a.position)
	}
	if a.orphaned {
		// Its log left the canonical chain: the step stops at its
		// boundary as a job would (Work holds it).
		run.OrphanedAt = ptr(time.Now())
	}
	journal := make([]*store.StepRun, 0, len(a.rows))
	for _, row := range a.rows {
		journal = append(journal, row)
	}
	a.carry.left--
	return &carriedStep{job: carriedJob(a.carry.job, a.carrying), run: &run, journal: journal, step: a.rows[a.carrying]}
}

// findCarried returns the step of journal that job carries, or nil: the
// step a rescued or retried carrier goes on with.
func findCarried(journal []*store.StepRun, job int64) *store.StepRun {
	if job == 0 {
		return nil
	}
	for _, s := range journal {
		if s.Carried(job) {
			return s
		}
	}
	return nil
}

// keepCarrying reports whether the carrier goes on to its next step now.
func (e *Engine) keepCarrying(ctx context.Context) bool {
	return ctx.Err() == nil && !e.stopping.Load()
}

// handOver gives a carried step its own job, in one transaction with the
// end of its carrying (fenced on it: a step settled or handed over
// meanwhile gets none). It runs even when ctx has ended: a carrier must
// not return leaving its step without a live job.
func (e *Engine) handOver(ctx context.Context, x *carriedStep) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		ok, err := store.HandOverStep(ctx, tx, x.run.ID, x.step.Key, x.job.ID)
		if err != nil || !ok {
			return err
		}
		return e.enqueue(ctx, tx, []river.InsertManyParams{e.stepJob(x.run, x.step.Key, 1, nil)})
	})
	if err != nil {
		return fmt.Errorf("hand step %s of run %s over to a job of its own: %w", x.step.Key, x.run.ID, err)
	}
	e.logger.Debug("carried step handed over to a job of its own", "run", x.run.ID, "step", x.step.Key, "carrier", x.job.ID)
	return nil
}

// checkCarriers sets whether steps may be carried: only while every
// registered process knows carriers (store.NodesKnowCarriers). Start checks
// before River starts and watchNodes every second after, so a process of an
// older version that registers stops the carrying within a second, and it
// resumes once that process has stopped or been found dead. A failed check
// changes nothing.
func (e *Engine) checkCarriers(ctx context.Context) {
	if e.inlineCap == 0 {
		return
	}
	ok, err := store.NodesKnowCarriers(ctx, e.pool)
	if err != nil {
		if ctx.Err() == nil {
			e.logger.Warn("check for processes of an older version", "err", err)
		}
		return
	}
	first := !e.carryChecked.Swap(true)
	switch was := e.carryOK.Swap(ok); {
	case !ok && (was || first):
		e.logger.Info("a process of an older rflow version shares the database: steps are not carried inline until it stops")
	case ok && !was && !first:
		e.logger.Info("every process sharing the database knows carriers again: steps are carried inline")
	}
}
