package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// advance is one transaction's worth of progress on a run. Starting from a
// place in the run, it evaluates pure steps (conditions, skips, goto, fail,
// foreach fan-out) inline, and stops at each side effect by journaling the
// step's row and enqueueing its job. Nothing is written until flush, which
// writes every row, the run's new state and the jobs in the caller's
// transaction: pure steps never cost a commit of their own.
type advance struct {
	e   *Engine
	p   *plan
	run *store.Run
	now time.Time
	// origin is set when run is an on_reorg response: the orphaned run it
	// answers (reorg.go).
	origin *origin

	trigger map[string]any
	rows    map[string]*store.StepRun // the journal, as loaded plus changes
	decoded map[string]any            // step key -> decoded output

	epoch      int
	status     store.RunStatus
	position   string
	errMsg     *string
	failedStep *string
	wakeAt     *time.Time
	ended      bool
	// born is set when the run's row was inserted in the state this
	// advance planned (claim_birth.go): flush never rewrites it.
	born bool

	newSteps []store.NewStep
	jobs     []river.InsertManyParams
	foreach  map[string]*foreachState

	// carry is the job settling this advance when it may carry the
	// successor inline (step_carry.go); carrying is the successor's key
	// when it does, created that its row was new, orphaned that the run's
	// update found the run orphaned.
	carry    *carrier
	carrying string
	created  bool
	orphaned bool
}

// foreachState is the progress of one foreach execution, kept in its
// journal row (input: the items; output: the progress, then the results).
type foreachState struct {
	key     string
	items   []any
	next    int // items started so far
	done    int
	results []any
	locked  bool // an existing row, locked for this transaction
	created int  // index into newSteps when created in this advance, else -1
	failed  bool
}

type foreachProgress struct {
	Next    int   `json:"next"`
	Done    int   `json:"done"`
	Results []any `json:"results"`
}

func (e *Engine) newAdvance(p *plan, run *store.Run, journal []*store.StepRun) (*advance, error) {
	a := &advance{
		e: e, p: p, run: run, now: time.Now(),
		rows:    map[string]*store.StepRun{},
		decoded: map[string]any{},
		foreach: map[string]*foreachState{},
		epoch:   run.Epoch,
		status:  run.Status,
		errMsg:  run.Error, failedStep: run.FailedStep,
	}
	if run.Position != nil {
		a.position = *run.Position
	}
	for _, s := range journal {
		a.rows[s.Key] = s
	}
	return a, nil
}

// triggerData decodes the run's trigger payload on first use: a claim
// whose first step needs no expression never decodes it.
func (a *advance) triggerData() map[string]any {
	if a.trigger == nil {
		v, err := workflow.UnmarshalJSON(a.run.Trigger)
		if err != nil {
			a.e.logger.Warn("undecodable trigger payload", "run", a.run.ID, "err", err)
		}
		a.trigger, _ = v.(map[string]any)
		if a.trigger == nil {
			a.trigger = map[string]any{}
		}
	}
	return a.trigger
}

// env builds the expression environment seen by a step at l.
func (a *advance) env(l loc) workflow.Env {
	data := a.triggerData()
	tv := make(map[string]any, len(data)+2)
	for k, v := range data {
		tv[k] = v
	}
	tv["key"] = a.run.TriggerKey
	tv["kind"] = string(a.run.TriggerKind) // expressions see plain strings
	run := a.run
	if a.origin != nil {
		run = a.origin.run // a response's expressions see the run it answers
	}
	// run.workflow is the name the project's file gives it (a workflow of
	// a project that is not its database's home is stored qualified).
	name, _ := a.e.ns.Local(run.Workflow)
	env := workflow.Env{
		"trigger": tv,
		"run": map[string]any{
			"id": run.ID.String(), "workflow": name, "attempt": int64(run.Attempt),
			"generation": run.Generation,
		},
		"env": a.e.envVars,
	}
	switch a.run.TriggerKind {
	case trigger.Event:
		env["event"] = data["event"]
	case trigger.Read:
		env["result"] = data["result"]
	case trigger.Webhook:
		env["headers"] = data["headers"]
		env["body"] = data["body"]
	}
	steps := map[string]any{}
	chain := a.chain(l)
	for id, n := range a.p.nodes {
		if n.depth > len(l.items) || !sameChain(ancestors(n), chain) {
			continue
		}
		if row := a.visible(id, l.items[:n.depth]); row != nil {
			steps[id] = map[string]any{"output": a.output(row), "status": string(row.Status)}
		}
	}
	if a.origin != nil {
		a.origin.addEnv(a, env, steps)
	}
	env["steps"] = steps
	if l.n != nil && l.n.parent != nil {
		i := l.items[len(l.items)-1]
		items := a.foreachItems(stepKey(l.n.parent.step.ID, l.items[:len(l.items)-1], a.epoch))
		if i < len(items) {
			env["item"] = items[i]
		}
		env["index"] = int64(i)
	}
	return env
}

// foreachItems returns the items of a foreach execution, from this
// transaction's state or the journal row's input.
func (a *advance) foreachItems(key string) []any {
	if fs := a.foreach[key]; fs != nil {
		return fs.items
	}
	cacheKey := "items:" + key
	if v, ok := a.decoded[cacheKey]; ok {
		items, _ := v.([]any)
		return items
	}
	var items []any
	if row := a.rows[key]; row != nil && len(row.Input) > 0 {
		v, _ := workflow.UnmarshalJSON(row.Input)
		items, _ = v.([]any)
	}
	a.decoded[cacheKey] = items
	return items
}

// orEnv returns env, building it first if it was not needed before.
func (a *advance) orEnv(env workflow.Env, l loc) workflow.Env {
	if env == nil {
		return a.env(l)
	}
	return env
}

// chain is the ids of the foreach steps enclosing l, outermost first.
func (a *advance) chain(l loc) []string {
	if l.n == nil {
		return nil
	}
	return ancestors(l.n)
}

func ancestors(n *node) []string {
	var out []string
	for p := n.parent; p != nil; p = p.parent {
		out = append([]string{p.step.ID}, out...)
	}
	return out
}

// sameChain reports whether inner (a step's enclosing foreach ids) is a
// prefix of outer (the current place's).
func sameChain(inner, outer []string) bool {
	if len(inner) > len(outer) {
		return false
	}
	for i := range inner {
		if inner[i] != outer[i] {
			return false
		}
	}
	return true
}

// visible returns the newest finished execution of a step at items: the
// current epoch first, then earlier ones (a step a goto jumped over keeps
// its older output).
func (a *advance) visible(id string, items []int) *store.StepRun {
	for e := a.epoch; e >= 0; e-- {
		if row := a.rows[stepKey(id, items, e)]; row != nil && (row.Status == store.StepCompleted || row.Status == store.StepSkipped) {
			return row
		}
	}
	return nil
}

func (a *advance) output(row *store.StepRun) any {
	if v, ok := a.decoded[row.Key]; ok {
		return v
	}
	var v any
	if len(row.Output) > 0 {
		v, _ = workflow.UnmarshalJSON(row.Output)
	}
	a.decoded[row.Key] = v
	return v
}

// startRun begins a freshly claimed run at its first step.
func (a *advance) startRun(ctx context.Context, tx pgx.Tx) error {
	first := a.p.first(sectionSteps)
	if first == nil {
		return a.endOfSection(ctx, tx, sectionSteps)
	}
	return a.runFrom(ctx, tx, loc{n: first})
}

// runFrom continues a thread of the run at l, evaluating pure steps until
// it parks at a side effect or the thread ends.
func (a *advance) runFrom(ctx context.Context, tx pgx.Tx, l loc) error {
	for {
		if l.n == nil {
			return nil
		}
		if a.ended {
			return nil
		}
		s := l.n.step
		key := stepKey(s.ID, l.items, a.epoch)
		if row := a.rows[key]; row != nil {
			switch row.Status {
			case store.StepCompleted, store.StepSkipped:
				// Already journaled (a replayed advance): never re-run it.
				next, err := a.after(ctx, tx, l, a.output(row))
				if err != nil || next == nil {
					return err
				}
				l = *next
				continue
			default:
				// Already parked or running elsewhere.
				return nil
			}
		}
		var env workflow.Env
		if s.If != nil {
			env = a.env(l)
			ok, err := s.If.Bool(env)
			if err != nil {
				return a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: %v", s.ID, err))
			}
			if !ok {
				a.journal(l, key, store.StepSkipped, nil, nil)
				next, err := a.after(ctx, tx, l, nil)
				if err != nil || next == nil {
					return err
				}
				l = *next
				continue
			}
		}
		k := a.e.kindOf(s.Kind)
		if k.arrive != nil {
			next, err := k.arrive(a, ctx, tx, l, key, env)
			if err != nil || next == nil {
				return err
			}
			l = *next
			continue
		}
		// A side effect: its row and attempt are journaled in this
		// transaction, before the job that performs it can run.
		// A run just claimed stays queued (its first step is): the
		// claim path then writes no update of the run row at all.
		a.park(l, key, store.StepQueued, nil)
		if a.status != store.RunWaitingDelay && a.status != store.RunQueued {
			a.status = store.RunRunning
		}
		return nil
	}
}

// journal records a pure step's row (created at flush).
func (a *advance) journal(l loc, key string, status store.StepStatus, output []byte, errMsg *string) {
	row := &store.StepRun{RunID: a.run.ID, Key: key, StepID: l.n.step.ID, Kind: l.n.step.Kind, Attempt: 1, Status: status, Output: output, Error: errMsg}
	a.rows[key] = row
	a.newSteps = append(a.newSteps, store.NewStep{Key: key, StepID: row.StepID, Kind: row.Kind, Status: status, Output: output, Error: errMsg})
}

// park journals a side-effect step at attempt 1 and enqueues its job.
func (a *advance) park(l loc, key string, status store.StepStatus, wake *time.Time) {
	row := &store.StepRun{RunID: a.run.ID, Key: key, StepID: l.n.step.ID, Kind: l.n.step.Kind, Attempt: 1, Status: status, WakeAt: wake}
	a.rows[key] = row
	a.newSteps = append(a.newSteps, store.NewStep{Key: key, StepID: row.StepID, Kind: row.Kind, Status: status, WakeAt: wake})
	a.jobs = append(a.jobs, a.e.stepJob(a.run, key, 1, wake))
	a.position = key
}

// after moves past a finished step at l. It returns the next place to run
// in the same thread, or nil when the thread ended here (a list ended and
// its continuation, if any, has already been run).
func (a *advance) after(ctx context.Context, tx pgx.Tx, l loc, output any) (*loc, error) {
	if next := a.p.next(l.n); next != nil {
		return &loc{n: next, items: l.items}, nil
	}
	if l.n.parent != nil {
		parent := loc{n: l.n.parent, items: l.items[:len(l.items)-1]}
		return nil, a.itemDone(ctx, tx, parent, l.items[len(l.items)-1], output)
	}
	return nil, a.endOfSection(ctx, tx, l.n.section)
}

// endOfSection ends the main steps (then finally runs), the finally block
// or a response's on_reorg steps (then the run or response ends).
func (a *advance) endOfSection(ctx context.Context, tx pgx.Tx, section string) error {
	if section == sectionSteps {
		if first := a.p.first(sectionFinally); first != nil {
			return a.runFrom(ctx, tx, loc{n: first})
		}
	}
	a.ended = true
	a.status = store.RunCompleted
	if a.errMsg != nil {
		a.status = store.RunFailed
	}
	return nil
}

// fail settles a step as failed and fails the run: the finally block runs,
// then the run ends as failed with its whole journal kept (dead letter).
func (a *advance) fail(ctx context.Context, tx pgx.Tx, l loc, key, msg string) error {
	if row := a.rows[key]; row == nil {
		a.journal(l, key, store.StepFailed, nil, &msg)
	} else {
		row.Status, row.Error = store.StepFailed, &msg
	}
	return a.failRun(ctx, tx, l, key, msg)
}

func (a *advance) failRun(ctx context.Context, tx pgx.Tx, l loc, key, msg string) error {
	if a.errMsg == nil {
		a.errMsg, a.failedStep = &msg, &key
	}
	if l.n.section == sectionSteps {
		return a.endOfSection(ctx, tx, sectionSteps)
	}
	// A failure inside finally ends the run at once.
	a.ended = true
	a.status = store.RunFailed
	return nil
}

// startForeach evaluates the items, journals the foreach row and starts up
// to `concurrency` items.
func (a *advance) startForeach(ctx context.Context, tx pgx.Tx, l loc, key string, env workflow.Env) error {
	s := l.n.step
	v, err := s.Foreach.Items.Eval(env)
	if err != nil {
		return a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: %v", s.ID, err))
	}
	items, ok := v.([]any)
	if !ok && v != nil {
		return a.fail(ctx, tx, l, key, fmt.Sprintf("step %s: foreach items must be a list, got %T", s.ID, v))
	}
	fs := &foreachState{key: key, items: items, results: make([]any, len(items)), created: len(a.newSteps)}
	a.foreach[key] = fs
	row := &store.StepRun{RunID: a.run.ID, Key: key, StepID: s.ID, Kind: s.Kind, Attempt: 1, Status: store.StepWaiting}
	a.rows[key] = row
	a.newSteps = append(a.newSteps, store.NewStep{Key: key, StepID: s.ID, Kind: s.Kind, Status: store.StepWaiting,
		Input: mustJSON(items)})
	if len(items) == 0 {
		row.Status = store.StepCompleted
		next, err := a.after(ctx, tx, l, []any{})
		if err != nil || next == nil {
			return err
		}
		return a.runFrom(ctx, tx, *next)
	}
	conc := max(s.Foreach.Concurrency, 1)
	body := a.p.nodes[s.Foreach.Steps[0].ID]
	for fs.next < len(items) && fs.next < conc {
		i := fs.next
		fs.next++
		if err := a.runFrom(ctx, tx, loc{n: body, items: append(append([]int{}, l.items...), i)}); err != nil {
			return err
		}
		if a.ended || a.errMsg != nil {
			return nil
		}
	}
	return nil
}

// itemDone records that item i of the foreach at l finished with output,
// starts the next waiting item, and when every item is done completes the
// foreach and continues after it.
func (a *advance) itemDone(ctx context.Context, tx pgx.Tx, l loc, i int, output any) error {
	key := stepKey(l.n.step.ID, l.items, a.epoch)
	fs, err := a.loadForeach(ctx, tx, key)
	if err != nil {
		return err
	}
	if fs.failed || a.errMsg != nil {
		return nil
	}
	if i < len(fs.results) {
		fs.results[i] = output
	}
	fs.done++
	if fs.next < len(fs.items) {
		j := fs.next
		fs.next++
		body := a.p.nodes[l.n.step.Foreach.Steps[0].ID]
		if err := a.runFrom(ctx, tx, loc{n: body, items: append(append([]int{}, l.items...), j)}); err != nil {
			return err
		}
	}
	if fs.done < len(fs.items) {
		return nil
	}
	row := a.rows[key]
	row.Status = store.StepCompleted
	row.Output = mustJSON(fs.results)
	a.decoded[key] = fs.results
	next, err := a.after(ctx, tx, l, fs.results)
	if err != nil || next == nil {
		return err
	}
	return a.runFrom(ctx, tx, *next)
}

// loadForeach returns the progress of a foreach execution, locking its row
// when it was created by an earlier transaction: concurrent items finishing
// on other workers serialise here.
func (a *advance) loadForeach(ctx context.Context, tx pgx.Tx, key string) (*foreachState, error) {
	if fs := a.foreach[key]; fs != nil {
		return fs, nil
	}
	row, err := store.LockJournalStep(ctx, tx, a.run.Journal, a.run.ID, key)
	if err != nil {
		return nil, err
	}
	a.rows[key] = row
	fs := &foreachState{key: key, locked: true, created: -1}
	if len(row.Input) > 0 {
		v, err := workflow.UnmarshalJSON(row.Input)
		if err != nil {
			return nil, fmt.Errorf("foreach %s items: %w", key, err)
		}
		fs.items, _ = v.([]any)
	}
	fs.results = make([]any, len(fs.items))
	if len(row.Output) > 0 {
		var p foreachProgress
		if err := json.Unmarshal(row.Output, &p); err == nil {
			fs.next, fs.done = p.Next, p.Done
		}
		// Results keep exact values: decode them with the workflow codec.
		if v, err := workflow.UnmarshalJSON(row.Output); err == nil {
			if m, ok := v.(map[string]any); ok {
				if rs, ok := m["results"].([]any); ok && len(rs) == len(fs.items) {
					fs.results = rs
				}
			}
		}
	}
	if row.Status != store.StepWaiting {
		fs.failed = true
	}
	a.foreach[key] = fs
	return fs, nil
}

// prepare finalises the rows this advance creates and queues the progress
// of foreach rows created by earlier transactions.
func (a *advance) prepare(w *store.Writes) {
	for key, fs := range a.foreach {
		if fs.failed {
			continue
		}
		row := a.rows[key]
		out := row.Output
		if row.Status != store.StepCompleted {
			out = mustJSON(foreachProgress{Next: fs.next, Done: fs.done, Results: fs.results})
		}
		if fs.created >= 0 {
			a.newSteps[fs.created].Status = row.Status
			a.newSteps[fs.created].Output = out
		} else if fs.locked {
			w.SetStepOutput(a.run.ID, key, row.Status, out)
		}
	}
	for i := range a.newSteps {
		a.newSteps[i].RunID = a.run.ID
		if row := a.rows[a.newSteps[i].Key]; row != nil && a.foreach[row.Key] == nil {
			a.newSteps[i].Status, a.newSteps[i].Error = row.Status, row.Error
		}
	}
	if a.ended {
		a.wakeAt = nil
	}
}

// changedRun reports whether the run row needs an update beyond what the
// claim wrote.
func (a *advance) changedRun() bool {
	return a.status != a.run.Status || a.ended || a.epoch != a.run.Epoch || a.errMsg != nil || a.wakeAt != nil
}

// flush writes what the advances decided, in tx: new journal rows (one
// statement for all), foreach progress and each run's new state (fenced on
// the run attempt) go to Postgres in one round trip together with whatever
// the caller queued in w (the step's outcome); then the jobs of parked
// steps (one COPY). fresh means the runs were just claimed: they have no
// journal rows yet (so theirs go in by COPY too), and a run's row is only
// rewritten when its state changed. It reports false when a fenced write
// found the run or step moved on: the caller rolls back.
func (e *Engine) flush(ctx context.Context, tx pgx.Tx, advs []*advance, fresh bool, w *store.Writes) (bool, error) {
	if w == nil {
		w = &store.Writes{}
		if len(advs) > 0 {
			w.Journal = advs[0].run.Journal // one journal per flush
		}
	}
	var steps []store.NewStep
	for _, a := range advs {
		a.prepare(w)
		a.pickCarried()
		steps = append(steps, a.newSteps...)
	}
	created := map[store.StepRef]bool{}
	if fresh {
		if err := store.CopySteps(ctx, tx, steps); err != nil {
			return false, err
		}
		for _, s := range steps {
			created[store.StepRef{RunID: s.RunID, Key: s.Key}] = true
		}
	} else {
		w.InsertSteps(steps, created)
	}
	var changes []store.RunChange
	for _, a := range advs {
		if a.ended && a.p != nil && a.p.waits {
			w.CancelWaits(a.run.ID)
		}
		if !fresh || (a.changedRun() && !a.born) {
			changes = append(changes, store.RunChange{ID: a.run.ID, Attempt: a.run.Attempt, RunUpdate: store.RunUpdate{
				Status: a.status, Position: a.position, Epoch: a.epoch, Error: a.errMsg, FailedStep: a.failedStep, WakeAt: a.wakeAt,
			}})
		}
	}
	w.UpdateRuns(changes)
	ok, err := w.Send(ctx, tx)
	if err != nil || !ok {
		return ok, err
	}
	for _, a := range advs {
		if a.carrying != "" {
			a.created = created[store.StepRef{RunID: a.run.ID, Key: a.carrying}]
			a.orphaned = w.Orphaned()
		}
	}
	if err := e.checkBreakers(ctx, tx, advs); err != nil {
		return false, err
	}
	e.observeEnded(advs)
	var jobs []river.InsertManyParams
	for _, a := range advs {
		for _, j := range a.jobs {
			if created[store.StepRef{RunID: a.run.ID, Key: stepKeyOf(j.Args)}] {
				jobs = append(jobs, j)
			}
		}
	}
	if err := e.enqueue(ctx, tx, jobs); err != nil {
		return false, err
	}
	return true, nil
}

// copyJobsFrom is the batch size from which step jobs go in by COPY: a
// COPY costs pgx an extra round trip (it describes the table first), so
// a step's one successor is cheaper as one INSERT.
const copyJobsFrom = 16

// enqueue inserts step jobs in tx. Step jobs carry no River uniqueness, so
// nothing can conflict (our own UNIQUE step rows are the gate).
func (e *Engine) enqueue(ctx context.Context, tx pgx.Tx, jobs []river.InsertManyParams) error {
	var err error
	switch {
	case len(jobs) == 0:
		return nil
	case len(jobs) < copyJobsFrom:
		_, err = e.client.InsertManyTx(ctx, tx, jobs)
	default:
		_, err = e.client.InsertManyFastTx(ctx, tx, jobs)
	}
	if err != nil {
		return fmt.Errorf("enqueue %d step job(s): %w", len(jobs), err)
	}
	return nil
}

// stepJob is the River job that performs one attempt of a step. Its args
// carry (a first attempt's imply) the run attempt, generation and step
// attempt it was made for, so a job that outlived them is recognised as
// stale.
func (e *Engine) stepJob(run *store.Run, key string, attempt int, at *time.Time) river.InsertManyParams {
	// A rehearsal's jobs go to its own queue, whoever enqueues them.
	opts := &river.InsertOpts{Queue: e.queueOf(run.Workflow)}
	if at != nil {
		opts.ScheduledAt = *at
	}
	return river.InsertManyParams{
		Args: StepArgs{RunID: run.ID, StepKey: key, Generation: run.Generation, RunAttempt: run.Attempt, Attempt: attempt,
			Reorg: run.Journal == store.ReorgJournal}.jobArgs(), // claim_first_step.go
		InsertOpts: opts,
	}
}

func mustJSON(v any) []byte {
	b, err := workflow.MarshalJSON(v)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	return b
}
