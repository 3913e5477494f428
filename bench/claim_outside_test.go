package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// BenchmarkClaimPathOutside is the claim path as a user runs it: a real
// `rflow start` with its default settings facing a backlog of 20,000
// Deposit logs on anvil (10 blocks of 2,000), for a workflow whose first
// step is a one-hour delay (so nothing but claiming happens), timed by
// counting the runs from another connection. Beside it, on the same
// Postgres in the same run, the ceiling of a claim path on River from a
// client: per 500 occurrences one INSERT … ON CONFLICT DO NOTHING …
// RETURNING of the run rows (with the payloads rflow made, sent by the
// client) and one River job per row by COPY (InsertManyFastTx), in one
// transaction. Rounds alternate the two.
func BenchmarkClaimPathOutside(b *testing.B) {
	const perTx, txs = 2000, 10
	const total = perTx * txs
	ctx := context.Background()
	config := backlogProject(b, perTx, txs)
	bin := buildRflow(b)

	var fromStart, fromFirst, ceiling, ratio []float64
	for range b.N {
		for range benchRounds {
			db := storetest.URL(b)
			pool, err := pgxpool.New(ctx, db)
			require.NoError(b, err)
			s, f, payloads := rflowStartClaims(b, pool, bin, db, config, total)
			c := clientCeiling(b, pool, payloads)
			pool.Close()
			fromStart, fromFirst, ceiling = append(fromStart, s), append(fromFirst, f), append(ceiling, c)
			ratio = append(ratio, f/c)
			fmt.Printf("  round: rflow start %.0f runs/s from its first run (%.0f/s from exec), client ceiling %.0f/s, ratio %.2f\n", f, s, c, f/c)
		}
	}
	s, f, c, r := median(fromStart), median(fromFirst), median(ceiling), median(ratio)
	b.ReportMetric(f, "rflow-start-runs/s")
	b.ReportMetric(s, "rflow-start-runs/s-from-exec")
	b.ReportMetric(c, "client-ceiling/s")
	fmt.Printf("claim path from outside: rflow start %.0f runs/s (first run to last; %.0f/s from exec), client ceiling %.0f/s, ratio %.2f (median of rounds)\n", f, s, c, r)
	summary.addRatio("claims from outside: rflow start / client ceiling", f, c, r, 0.5)
	summary.add("claims from outside, from exec: rflow start / client ceiling", s, c, 0)
}

// backlogProject starts anvil with txs blocks of perTx Deposit logs and
// writes a project whose one workflow claims a run per log and parks it at
// a one-hour delay; it returns the project file.
func backlogProject(b *testing.B, perTx, txs int) string {
	node := anviltest.Start(b, anviltest.Options{})
	em := anviltest.DeployEmitter(b, node)
	for i := range txs {
		em.EmitMany(int64(perTx), int64(i*perTx))
	}
	dir := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(dir, "Emitter.json"), anviltest.EmitterABIJSON(b), 0o644))
	config := filepath.Join(dir, "rflow.yaml")
	// Only what a project must say: no poll interval, range or batch
	// settings, so rflow's defaults are what is measured.
	require.NoError(b, os.WriteFile(config, []byte(fmt.Sprintf(`
name: outside
networks:
  - { name: local, chain_id: 31337, rpc: %q }
contracts:
  - { name: Emitter, abi: ./Emitter.json, network: local, address: %q }
workflows:
  - name: backlog
    trigger: { event: { contract: Emitter, event: Deposit, run_on: head } }
    steps:
      - { id: later, delay: 1h }
`, node.URL, em.Address.Hex())), 0o644))
	return config
}

// rflowStartClaims starts `rflow start` (defaults) on db and counts its
// runs from pool every 20 ms until there are total. It returns the rate
// from the process's exec and from the first run counted, and the runs'
// payloads as claims (for the ceiling on the same data).
func rflowStartClaims(b *testing.B, pool *pgxpool.Pool, bin, db, config string, total int) (fromExec, fromFirst float64, claims []store.Claim) {
	return rflowStartClaimsThen(b, pool, bin, db, config, total, nil)
}

// rflowStartClaimsThen is rflowStartClaims calling then, when not nil,
// once every run is counted and before the process is killed.
func rflowStartClaimsThen(b *testing.B, pool *pgxpool.Pool, bin, db, config string, total int, then func(elapsed time.Duration)) (fromExec, fromFirst float64, claims []store.Claim) {
	ctx := context.Background()
	start := time.Now()
	cmd := startRflow(b, bin, db, config)
	var first time.Time
	deadline := start.Add(5 * time.Minute)
	for {
		var n int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&n))
		if n > 0 && first.IsZero() {
			first = time.Now()
		}
		if n >= total {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("rflow start claimed %d of %d runs in 5m", n, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	end := time.Now()
	if then != nil {
		then(end.Sub(start))
	}
	_ = cmd.Process.Kill() // its work is done; the rows are what count
	_ = cmd.Wait()
	var jobs int
	require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE kind = 'rflow.step.first'`).Scan(&jobs))
	require.Equal(b, total, jobs, "one first-step job per run")
	rows, err := pool.Query(ctx, `SELECT trigger_key, trigger, block_number, block_hash FROM rflow.workflow_runs`)
	require.NoError(b, err)
	for rows.Next() {
		c := store.Claim{Workflow: "ceiling", TriggerKind: "event", ChainID: anviltest.ChainID}
		require.NoError(b, rows.Scan(&c.TriggerKey, &c.Trigger, &c.BlockNumber, &c.BlockHash))
		claims = append(claims, c)
	}
	require.NoError(b, rows.Err())
	require.Len(b, claims, total)
	return float64(total) / end.Sub(start).Seconds(), float64(total) / end.Sub(first).Seconds(), claims
}

// clientCeiling is the client-side ceiling on claims: per 500, the run
// rows by one INSERT … ON CONFLICT DO NOTHING … RETURNING and their River
// jobs by InsertManyFastTx, in one transaction.
func clientCeiling(b *testing.B, pool *pgxpool.Pool, claims []store.Claim) float64 {
	ctx := context.Background()
	addWorkflow(b, pool, "ceiling")
	client := insertClient(b, pool)
	start := time.Now()
	for j := 0; j < len(claims); j += 500 {
		require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return runAndJobRows(ctx, client, tx, claims[j:min(j+500, len(claims))])
		}))
	}
	return float64(len(claims)) / time.Since(start).Seconds()
}
