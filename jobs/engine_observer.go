package jobs

import (
	"time"

	"github.com/rflow-dev/rflow/store"
)

// Observer is told about what the engine does on its hot path, in memory
// and synchronously: implementations must be cheap and must never block or
// touch the database (the metrics package counts into Prometheus
// collectors). Events are reported once the write that records them has
// been made in its transaction; a transaction that then fails to commit
// (rare: a lost connection) has still been counted.
type Observer interface {
	// RunsClaimed: the claim gate created n runs of workflow for a trigger
	// of kind (event, cron, block, read, webhook, manual).
	RunsClaimed(workflow, kind string, n int)
	// StepFinished: an attempt of a side-effecting step of kind ended with
	// status (completed, failed, retrying) after d. A send's attempt ends
	// when the relayer finalises its transaction.
	StepFinished(kind, status string, d time.Duration)
	// RunFinished: a run of workflow ended as status (completed or failed).
	RunFinished(workflow, status string)
	// RunRepaired: a pending step of a run of workflow had lost its River
	// job and was enqueued again (maintenance_repair.go).
	RunRepaired(workflow string)
}

// localObserver tells its Observer the project's local workflow names, as
// every label rflow shows has them.
type localObserver struct {
	Observer
	ns store.Namespace
}

func (o localObserver) RunsClaimed(workflow, kind string, n int) {
	o.Observer.RunsClaimed(o.local(workflow), kind, n)
}
func (o localObserver) RunFinished(workflow, status string) {
	o.Observer.RunFinished(o.local(workflow), status)
}
func (o localObserver) RunRepaired(workflow string) { o.Observer.RunRepaired(o.local(workflow)) }

func (o localObserver) local(workflow string) string {
	local, _ := o.ns.Local(workflow)
	return local
}

// nopObserver is the engine's Observer when Config.Observer is nil.
type nopObserver struct{}

func (nopObserver) RunsClaimed(string, string, int)            {}
func (nopObserver) StepFinished(string, string, time.Duration) {}
func (nopObserver) RunFinished(string, string)                 {}
func (nopObserver) RunRepaired(string)                         {}

// observeOutcome reports a step attempt's outcome as its journal records it.
func (e *Engine) observeOutcome(kind string, o outcome, retried bool) {
	status := "completed"
	switch {
	case o.abandon:
		return
	case o.err != nil && retried:
		status = "retrying"
	case o.err != nil:
		status = "failed"
	}
	if !o.started.IsZero() {
		e.observer.StepFinished(kind, status, time.Since(o.started))
	}
}

// observeEnded reports the runs an advance ended.
func (e *Engine) observeEnded(advs []*advance) {
	for _, a := range advs {
		if a.ended && a.origin == nil { // a reorg response is not a run
			e.observer.RunFinished(a.run.Workflow, string(a.status))
		}
	}
}

// observeSend reports a send attempt, from its hand-off to the relayer
// (the step's started_at) to its final transaction.
func (e *Engine) observeSend(step *store.StepRun, o outcome) {
	if step.StartedAt == nil {
		return
	}
	status := store.StepCompleted
	if o.err != nil {
		status = store.StepFailed
	}
	e.observer.StepFinished("send", string(status), time.Since(*step.StartedAt))
}
