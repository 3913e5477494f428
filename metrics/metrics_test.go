package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/metrics"
)

// TestRegistryPerInstance: two Metrics in one process count apart and
// register nothing in the global default registry.
func TestRegistryPerInstance(t *testing.T) {
	t.Parallel()
	a, b := metrics.New(metrics.Config{}), metrics.New(metrics.Config{})
	a.RunsClaimed("w", "cron", 2)
	a.StepFinished("http_call", "completed", 30*time.Millisecond)
	b.RunsClaimed("w", "cron", 1)

	claims := func(reg *prometheus.Registry) float64 {
		t.Helper()
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "rflow_claims_total" {
				require.Len(t, f.GetMetric(), 1)
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no rflow_claims_total")
		return 0
	}
	require.Equal(t, 2.0, claims(a.Registry()))
	require.Equal(t, 1.0, claims(b.Registry()))

	global, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range global {
		require.False(t, strings.HasPrefix(f.GetName(), "rflow_"), "%s is in the default registry", f.GetName())
	}
}
