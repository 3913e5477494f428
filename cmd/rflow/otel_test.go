package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTracingFromEnvironment: tracing is off unless the standard variables
// ask for OTLP, and a setting rflow cannot honour is an error naming it.
func TestTracingFromEnvironment(t *testing.T) {
	ctx := context.Background()
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	tr, err := setupTracing(ctx)
	require.NoError(t, err)
	require.Nil(t, tr.provider, "off by default")

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	tr, err = setupTracing(ctx)
	require.NoError(t, err)
	require.Nil(t, tr.provider, "none wins over an endpoint")

	t.Setenv("OTEL_TRACES_EXPORTER", "")
	tr, err = setupTracing(ctx)
	require.NoError(t, err)
	require.NotNil(t, tr.provider, "an endpoint turns OTLP on")
	require.Len(t, tr.middleware, 1, "with otelriver")
	require.NoError(t, tr.shutdown(ctx), "nothing recorded, nothing to flush")

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, err = setupTracing(ctx)
	require.ErrorContains(t, err, "OTEL_TRACES_EXPORTER=zipkin")

	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	_, err = setupTracing(ctx)
	require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
}
