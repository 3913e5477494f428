package jobs

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
)

// A run is one trace: the trigger occurrence is its root span, the claim
// its child, then one span per step attempt and one for each transaction's
// outcome. Steps run as River jobs, possibly in other processes, so the
// trace context travels in each job's metadata (W3C traceparent): the
// propagation middleware writes it when a job is inserted and makes it the
// parent of whatever works the job. Without a TracerProvider spans are
// no-ops and no metadata is written.

// tracerName is the instrumentation scope of rflow's own spans.
const tracerName = "github.com/rflow-dev/rflow/jobs"

// metaTraceKey is the job metadata key of the W3C trace context, the one
// otelriver uses too.
const metaTraceKey = "traceparent"

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// propagator carries trace context through River job metadata: on insert
// it records the inserting context's span (unless the job already carries
// one, as a freshly claimed run's first job does); on work it makes the
// job's recorded span the parent of the worker's context.
type propagator struct {
	river.MiddlewareDefaults
}

func (propagator) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		for _, p := range params {
			p.Metadata = withTraceContext(ctx, p.Metadata)
		}
	}
	return doInner(ctx)
}

func (propagator) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if sc := traceContextOf(job.Metadata); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return doInner(ctx)
}

// withTraceContext adds ctx's trace context to job metadata that has none.
func withTraceContext(ctx context.Context, metadata []byte) []byte {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return metadata
	}
	m := map[string]any{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &m); err != nil {
			return metadata
		}
	}
	if _, ok := m[metaTraceKey]; ok {
		return metadata
	}
	for k, v := range carrier {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return metadata
	}
	return b
}

func traceContextOf(metadata []byte) trace.SpanContext {
	if len(metadata) == 0 {
		return trace.SpanContext{}
	}
	var m map[string]any
	if err := json.Unmarshal(metadata, &m); err != nil {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			carrier[k] = s
		}
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// traceClaim starts the trace of each freshly claimed run: a root span for
// its trigger occurrence and a claim span under it, whose context the
// run's first jobs carry. The spans end at once: the claim is the insert
// the caller is about to commit. A caller's own span (a webhook request's,
// a cron scan's) is linked, not made the parent, so each run is a trace of
// its own even when one batch claims many.
func (e *Engine) traceClaim(ctx context.Context, a *advance) {
	if !e.tracing {
		return
	}
	run := a.run
	attrs := []attribute.KeyValue{
		attribute.String("rflow.workflow", run.Workflow),
		attribute.String("rflow.run.id", run.ID.String()),
		attribute.String("rflow.trigger.kind", string(run.TriggerKind)),
		attribute.String("rflow.trigger.key", run.TriggerKey),
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindProducer)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	tctx, trigger := e.tracer.Start(ctx, "trigger "+string(run.TriggerKind), opts...)
	cctx, claim := e.tracer.Start(tctx, "claim", trace.WithAttributes(attrs...))
	for i := range a.jobs {
		if a.jobs[i].InsertOpts == nil {
			a.jobs[i].InsertOpts = &river.InsertOpts{}
		}
		a.jobs[i].InsertOpts.Metadata = withTraceContext(cctx, a.jobs[i].InsertOpts.Metadata)
	}
	claim.End()
	trigger.End()
}

// traceStep starts the span of one step attempt; end records its outcome.
func (e *Engine) traceStep(ctx context.Context, run *store.Run, step *store.StepRun) (context.Context, func(error)) {
	if !e.tracing {
		return ctx, func(error) {}
	}
	ctx, span := e.tracer.Start(ctx, "step "+step.StepID, trace.WithAttributes(
		attribute.String("rflow.workflow", run.Workflow),
		attribute.String("rflow.run.id", run.ID.String()),
		attribute.String("rflow.step.id", step.StepID),
		attribute.String("rflow.step.key", step.Key),
		attribute.String("rflow.step.kind", step.Kind),
		attribute.Int("rflow.step.attempt", step.Attempt),
	))
	return ctx, func(err error) {
		var snooze *river.JobSnoozeError
		if err != nil && !errors.As(err, &snooze) {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// traceTx records a send's final transaction (hash and receipt) in the
// run's trace; ctx carries the trace of the step that queued it.
func (e *Engine) traceTx(ctx context.Context, t *relayer.Transaction) (context.Context, func()) {
	if !e.tracing {
		return ctx, func() {}
	}
	ctx, span := e.tracer.Start(ctx, "tx "+string(t.Status), trace.WithAttributes(
		attribute.String("rflow.tx.id", t.TxID.String()),
		attribute.String("rflow.tx.external_id", t.ExternalID),
		attribute.String("rflow.tx.hash", t.Hash.Hex()),
		attribute.String("rflow.tx.status", string(t.Status)),
		attribute.Int64("rflow.tx.block", int64(t.BlockNumber)),
		attribute.Int64("rflow.tx.gas_used", int64(t.GasUsed)),
		attribute.Int64("rflow.chain_id", int64(t.ChainID)),
	))
	if t.Error != "" {
		span.SetStatus(codes.Error, t.Error)
	}
	return ctx, func() { span.End() }
}
