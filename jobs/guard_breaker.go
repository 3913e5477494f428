package jobs

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// FaultBeforePage is where crash tests kill the process between a circuit
// breaker trip (committed with the failing run's outcome and the page's
// job) and the page's HTTP call.
const FaultBeforePage = "before-page"

// pageMaxAttempts bounds the retries of a page whose notifier is down:
// with River's backoff, about three weeks of trying.
const pageMaxAttempts = 25

// PageArgs is the job that pages a notifier once for one circuit breaker
// trip. It is inserted in the transaction that trips the breaker (an
// outbox), so a trip is paged even if the process dies right after it, and
// never paged without a trip.
type PageArgs struct {
	// TripID is the page's Idempotency-Key: a retry after a crash between
	// the call and the job's completion repeats it, so the receiver can
	// drop the duplicate.
	TripID   uuid.UUID `json:"trip_id"`
	Project  string    `json:"project"`
	Workflow string    `json:"workflow"`
	Notifier string    `json:"notifier"`
	Reason   string    `json:"reason"`
	PausedAt time.Time `json:"paused_at"`
}

func (PageArgs) Kind() string { return "rflow.breaker_page" }

func (PageArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: pageMaxAttempts} }

// checkBreakers trips the circuit breaker of every workflow a run of advs
// failed in, in tx, right after the runs' outcomes were written there: the
// trip and its page commit with the failure or not at all. Workflows are
// locked in name order, so two transactions failing runs of the same
// workflows cannot deadlock.
func (e *Engine) checkBreakers(ctx context.Context, tx pgx.Tx, advs []*advance) error {
	breakers := map[string]*workflow.CircuitBreaker{}
	var names []string
	for _, a := range advs {
		name := a.run.Workflow
		if _, seen := breakers[name]; seen || !a.ended || a.status != store.RunFailed || a.origin != nil {
			continue
		}
		p := a.p
		if p == nil { // a run failed at its trigger
			var err error
			if p, err = e.plan(ctx, tx, name, a.run.Generation); err != nil {
				return err
			}
		}
		breakers[name] = p.wf.CircuitBreaker
		if p.wf.CircuitBreaker != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		cb := breakers[name]
		trip, err := store.TripBreaker(ctx, tx, name, cb.Failures, cb.Window)
		if err != nil || trip == nil {
			return err
		}
		e.logger.Warn("circuit breaker tripped: workflow paused; resume it with rflow workflows resume",
			"workflow", name, "reason", trip.Reason, "notify", cb.Notify)
		if cb.Notify == "" {
			continue
		}
		args := PageArgs{TripID: uuid.New(), Project: e.project.Name, Workflow: name, Notifier: cb.Notify,
			Reason: trip.Reason, PausedAt: trip.At}
		if _, err := e.client.InsertTx(ctx, tx, args, &river.InsertOpts{Queue: e.queueOf(name)}); err != nil {
			return fmt.Errorf("circuit breaker of %s: enqueue the page: %w", name, err)
		}
	}
	return nil
}

// pageWorker sends a circuit breaker's page through the notify step's
// request code.
type pageWorker struct {
	river.WorkerDefaults[PageArgs]
	e *Engine
}

func (w *pageWorker) Work(ctx context.Context, job *river.Job[PageArgs]) error {
	e, a := w.e, job.Args
	e.faults.Hit(FaultBeforePage)
	a.Workflow, _ = e.ns.Local(a.Workflow) // a page names the project's own name
	text := fmt.Sprintf("rflow %s: workflow %s paused at %s (%s). New runs wait; start them with: rflow workflows resume %s",
		a.Project, a.Workflow, a.PausedAt.UTC().Format(time.RFC3339), a.Reason, a.Workflow)
	fields := map[string]any{"event": "circuit_breaker.tripped", "text": text, "project": a.Project,
		"workflow": a.Workflow, "reason": a.Reason, "paused_at": a.PausedAt.UTC().Format(time.RFC3339), "trip_id": a.TripID.String()}
	err := e.page(ctx, a.Notifier, "page for workflow "+a.Workflow, text, fields,
		map[string]string{"Idempotency-Key": a.TripID.String(), "X-Rflow-Workflow": a.Workflow})
	if err != nil {
		return err
	}
	e.logger.Info("circuit breaker paged", "workflow", a.Workflow, "notifier", a.Notifier, "trip", a.TripID)
	return nil
}

// page posts one message to a project notifier: text for Slack and
// Discord, fields as the JSON body of a plain webhook. headers carry the
// message's Idempotency-Key, so a retry after a crash can be dropped by
// the receiver. what names the message in errors.
func (e *Engine) page(ctx context.Context, notifier, what, text string, fields map[string]any, headers map[string]string) error {
	n := e.project.Notifier(notifier)
	if n == nil {
		// A deploy from another project file named a notifier this
		// process does not have; retrying cannot help.
		return river.JobCancel(fmt.Errorf("%s: this process's project has no notifier %q", what, notifier))
	}
	if n.URL == "" {
		return fmt.Errorf("%s: notifier %s has no URL (an unset environment variable?)", what, n.Name)
	}
	payload, chat := chatPayload(n.Format, text)
	if !chat {
		payload = fields
	}
	body, err := workflow.MarshalJSON(payload)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req := request{method: http.MethodPost, url: n.URL, contentType: "application/json", body: body, headers: headers}
	ok := func(code int) bool { return code >= 200 && code < 300 }
	if _, _, err := e.roundTrip(ctx, req, notifyTimeout, "", ok); err != nil {
		return fmt.Errorf("%s: notifier %s: %w", what, n.Name, err)
	}
	return nil
}
