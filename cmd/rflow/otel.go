package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing is the OpenTelemetry set-up of one process: nil provider when
// tracing is off.
type tracing struct {
	provider   trace.TracerProvider
	middleware []rivertype.Middleware
	shutdown   func(context.Context) error
}

// setupTracing reads the standard OpenTelemetry variables. Tracing is off
// unless OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// OTEL_TRACES_EXPORTER is not "none". Spans go out over OTLP/HTTP; the
// exporter reads the rest of OTEL_EXPORTER_OTLP_* (headers, timeout,
// certificates) itself, and OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
// name the process.
func setupTracing(ctx context.Context) (*tracing, error) {
	off := &tracing{shutdown: func(context.Context) error { return nil }}
	exporter := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch {
	case exporter == "none", exporter == "" && !endpoint:
		return off, nil
	case exporter != "" && exporter != "otlp":
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s is not supported: use otlp (or none)", exporter)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%s is not supported: rflow exports traces over http/protobuf", v, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(serviceName())))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &tracing{
		provider: tp,
		middleware: []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			TracerProvider: tp, EnableWorkSpanJobKindSuffix: true,
		})},
		shutdown: func(ctx context.Context) error {
			return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
		},
	}, nil
}

func serviceName() string {
	if n := os.Getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "rflow"
}
