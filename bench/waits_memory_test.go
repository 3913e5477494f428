package bench

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
)

// BenchmarkMemoryParkedWaits parks 10,000 runs on a wait_for of a real
// node's Claimed event, each keyed on its own amount, starts `rflow start`
// on them and samples its peak resident set for 25 s while a few matching
// Claimed logs arrive: the wait feed runs and its matcher settles those
// waits (their runs go on to complete) with the other waits still parked.
// Waits are rows of rflow.waits, so the figure should not grow with them.
func BenchmarkMemoryParkedWaits(b *testing.B) {
	const waits, matches = 10_000, 5
	const window = 25 * time.Second
	bin := buildRflow(b)
	srv := benchServer(b)
	var peak int64
	for range b.N {
		node := anviltest.Start(b, anviltest.Options{})
		em := anviltest.DeployEmitter(b, node)
		db, pool, config := claimRuns(b, fmt.Sprintf(`
name: waits
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: %q }
workflows:
  - name: parked
    trigger: { manual: {} }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.input.n }}" }
          timeout: 1h
      - { id: tell, http_call: { method: POST, url: "%s/tell" } }
`, node.URL, em.Address.Hex(), srv.URL), map[string][]byte{"Vault.json": anviltest.EmitterABIJSON(b)},
			"parked", waits, func(i int) []byte { return fmt.Appendf(nil, `{"input": {"n": %d}}`, i) })
		require.Equal(b, waits, countRows(b, pool, `SELECT count(*) FROM rflow.waits WHERE status = 'waiting'`))

		start := time.Now()
		cmd := startRflow(b, bin, db, config)
		stop := samplePeakRSS(b, cmd.Process.Pid)
		// The feed follows the chain from the head it first sees: the
		// matching logs go after it has a cursor.
		waitCount(b, pool, `SELECT count(*) FROM indexer.cursors WHERE task LIKE 'wait/%'`, 1)
		for i := range matches {
			em.Transact("claim", big.NewInt(int64(i*(waits/matches))))
		}
		node.Mine(2)
		waitCount(b, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`, matches)
		settled := time.Since(start)
		time.Sleep(time.Until(start.Add(window)))
		peak = max(peak, stop())

		require.Equal(b, matches, countRows(b, pool, `SELECT count(*) FROM rflow.waits WHERE status = 'matched'`))
		require.Equal(b, waits-matches, countRows(b, pool, `SELECT count(*) FROM rflow.waits WHERE status = 'waiting'`),
			"only the matched waits moved")
		require.Equal(b, matches, countRows(b, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`))
		fmt.Printf("rflow start with %d parked waits: peak RSS %.0f MB (%d matches settled %.1f s after start)\n",
			waits, float64(peak)/1024, matches, settled.Seconds())
	}
	b.ReportMetric(float64(peak)/1024, "MB-peak-RSS")
	summary.addAbs(fmt.Sprintf("rflow start RSS, %d parked waits", waits), float64(peak)/1024, "MB", "< 300 MB", peak < 300*1024)
}

// countRows runs a count(*) query.
func countRows(b *testing.B, pool *pgxpool.Pool, query string) int {
	var n int
	require.NoError(b, pool.QueryRow(context.Background(), query).Scan(&n))
	return n
}
