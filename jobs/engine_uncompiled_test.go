package jobs_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/workflow"
)

// lockedBuffer is a log sink safe for the engine's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUncompiledGenerationWarnsOnceByItsKind: a process whose file lacks
// what a newer deployed generation uses (another process deployed a file
// with a new contract) logs that once, naming the generation's trigger
// kind, not "cron:" on every refresh of the cron loop.
func TestUncompiledGenerationWarnsOnceByItsKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	load := func(src string) *workflow.Project {
		dir := t.TempDir()
		path := filepath.Join(dir, "rflow.yaml")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "Vault.json"), devchain.EmitterABI(), 0o644))
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		p, err := workflow.Load(path, workflow.LoadOptions{})
		require.NoError(t, err)
		return p
	}
	old := load(`
name: t
workflows:
  - name: w
    trigger: { cron: { schedule: "0 0 1 1 *" } }
    steps: [ { id: a, delay: 1s } ]
`)
	newer := load(`
name: t
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: w
    trigger: { webhook: { idempotency_key: "${{ body.id }}" } }
    steps:
      - id: a
        wait_for: { event: { contract: Vault, event: Claimed }, timeout: 1h, confirmations: 1 }
`)
	pool, _ := deployed(t, old)
	deployer, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: newer})
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := deployer.DeployWorkflows(ctx, tx, nil)
		return err
	}))

	var logs lockedBuffer
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: old, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 12*time.Second) // two refreshes of the cron loop
	defer cancel()
	e.RunCron(cctx)
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "workflow w generation 2 does not compile against this process's project file; its webhook trigger does not run"), out)
	require.NotContains(t, out, "cron:", out)
}
