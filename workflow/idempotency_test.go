package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func loadIdempotency(t *testing.T, block string) (*Project, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	src := "name: t\n" + block + "workflows:\n  - name: w\n    trigger: { manual: {} }\n    steps:\n      - { id: a, delay: 1s }\n"
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	p, err := Load(path, LoadOptions{LookupEnv: lookup(nil)})
	return p, path, err
}

func TestIdempotencyRetention(t *testing.T) {
	t.Parallel()
	p, _, err := loadIdempotency(t, "")
	require.NoError(t, err)
	require.Equal(t, Idempotency{ClientRetention: 24 * time.Hour, DeterministicRetention: 14 * 24 * time.Hour}, p.Idempotency)

	p, _, err = loadIdempotency(t, "idempotency:\n  client_retention: 90m\n  deterministic_retention: 30d\n")
	require.NoError(t, err)
	require.Equal(t, Idempotency{ClientRetention: 90 * time.Minute, DeterministicRetention: 30 * 24 * time.Hour}, p.Idempotency)

	p, _, err = loadIdempotency(t, "idempotency:\n  deterministic_retention: 7d\n")
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, p.Idempotency.ClientRetention, "an unset field keeps its default")
	require.Equal(t, 7*24*time.Hour, p.Idempotency.DeterministicRetention, "the minimum itself is allowed")

	for _, c := range []struct{ block, want string }{
		{"idempotency:\n  deterministic_retention: 6d\n", ":3:28: idempotency.deterministic_retention 6d is below the minimum of 7d"},
		{"idempotency:\n  deterministic_retention: 167h\n", ":3:28: idempotency.deterministic_retention 167h0m0s is below the minimum of 7d"},
		{"idempotency:\n  client_retention: 0s\n", ":3:21: idempotency.client_retention must be positive"},
		{"idempotency:\n  client_retention: soon\n", ":3:21: idempotency.client_retention: \"soon\" is not a duration"},
		{"idempotency:\n  client_retention: 24\n", ":3:21: idempotency.client_retention: 24 has no unit"},
		{"idempotency:\n  client_ttl: 1h\n", ":3:3: unknown key \"client_ttl\" in idempotency"},
		{"idempotency: 24h\n", ":2:14: idempotency must be a mapping"},
	} {
		_, path, err := loadIdempotency(t, c.block)
		var ds Diagnostics
		require.True(t, errors.As(err, &ds), "%q: %v", c.block, err)
		require.Len(t, ds, 1, "%s", ds.Error())
		require.Contains(t, ds[0].String(), path+c.want)
	}
}

func TestCheckDeterministicRetention(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckDeterministicRetention(MinDeterministicRetention))
	require.ErrorContains(t, CheckDeterministicRetention(MinDeterministicRetention-time.Second), "minimum of 7d")
	d, err := ParseRetention("14d")
	require.NoError(t, err)
	require.Equal(t, DefaultDeterministicRetention, d)
	_, err = ParseRetention("-1h")
	require.Error(t, err)
}

func TestIdempotencyCleanup(t *testing.T) {
	t.Parallel()
	p, _, err := loadIdempotency(t, "idempotency:\n  cleanup: { batch: 2000, max_batches: 50, every: 30s }\n")
	require.NoError(t, err)
	require.Equal(t, LedgerCleanup{Batch: 2000, MaxBatches: 50, Every: 30 * time.Second}, p.Idempotency.Cleanup)
	require.Equal(t, 24*time.Hour, p.Idempotency.ClientRetention, "retention keeps its default")

	for _, c := range []struct{ block, want string }{
		{"idempotency:\n  cleanup: { batch: 0 }\n", ":3:21: idempotency.cleanup.batch must be between 1 and 100000, not 0"},
		{"idempotency:\n  cleanup: { max_batches: lots }\n", ":3:27: idempotency.cleanup.max_batches must be an integer"},
		{"idempotency:\n  cleanup: { every: 100ms }\n", ":3:21: idempotency.cleanup.every must be at least 1s"},
		{"idempotency:\n  cleanup: { size: 10 }\n", ":3:14: unknown key \"size\" in idempotency.cleanup"},
	} {
		_, path, err := loadIdempotency(t, c.block)
		var ds Diagnostics
		require.True(t, errors.As(err, &ds), "%q: %v", c.block, err)
		require.Len(t, ds, 1, "%s", ds.Error())
		require.Contains(t, ds[0].String(), path+c.want)
	}
}
