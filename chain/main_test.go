package chain_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	storetest.Main(m)
}

// gateClaimer is the engine's Claimer without first step jobs: it only runs
// the claim gate.
type gateClaimer struct{}

func (gateClaimer) ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error) {
	runs, err := store.ClaimRuns(ctx, tx, claims)
	return len(runs), err
}

func addWorkflows(t *testing.T, pool *pgxpool.Pool, names ...string) {
	t.Helper()
	for _, n := range names {
		_, err := pool.Exec(context.Background(),
			`INSERT INTO rflow.workflows (name, spec_hash, spec) VALUES ($1, 'h', '{}')`, n)
		require.NoError(t, err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func network(urls ...string) chain.Network {
	return chain.Network{Name: "local", ChainID: anviltest.ChainID, RPC: urls, Confirmations: 3,
		BlockPollInterval: 50 * time.Millisecond, MaxBlockRange: 2000}
}

// runService starts a Service and stops it when the test ends.
func runService(t *testing.T, pool *pgxpool.Pool, cfg chain.Config) *chain.Service {
	t.Helper()
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := chain.NewService(ctx, pool, gateClaimer{}, cfg, testLogger(t))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		svc.Close()
	})
	return svc
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
