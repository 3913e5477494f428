package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/trigger"
)

// gate is the claim gate as a chain.Claimer (no River jobs). It counts the
// runs it created and optionally reports when claims went through.
type gate struct {
	claimed chan time.Time
	runs    *atomic.Int64
}

func (g gate) ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error) {
	runs, err := store.ClaimRuns(ctx, tx, claims)
	if err != nil {
		return 0, err
	}
	if g.runs != nil {
		g.runs.Add(int64(len(runs)))
	}
	if g.claimed != nil && len(runs) > 0 {
		select {
		case g.claimed <- time.Now():
		default:
		}
	}
	return len(runs), nil
}

func addWorkflow(b *testing.B, pool *pgxpool.Pool, name string) {
	b.Helper()
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO rflow.workflows (name, spec_hash, spec) VALUES ($1, 'h', '{}')`, name); err != nil {
		b.Fatal(err)
	}
}

func runChain(b *testing.B, pool *pgxpool.Pool, cfg chain.Config, claimer chain.Claimer) func() {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := chain.NewService(ctx, pool, claimer, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		svc.Close()
	}
}

func cursorAt(b *testing.B, pool *pgxpool.Pool, block int64) bool {
	b.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM indexer.cursors WHERE block >= $1`, block).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n > 0
}

func countRuns(b *testing.B, pool *pgxpool.Pool, wf string) int {
	b.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, wf).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkChainIngest measures event logs claimed per second end to end
// from a real anvil (eth_getLogs, decode, claim gate, cursor advance), and
// beside it the same run's raw ceiling: the same number of claims, with
// payloads of the same shape, through the bare claim gate (INSERT … SELECT
// unnest … ON CONFLICT DO NOTHING RETURNING), 500 per transaction, on one
// connection.
func BenchmarkChainIngest(b *testing.B) {
	const perTx, txs = 2000, 25
	const total = perTx * txs
	ctx := context.Background()
	pool := storetest.Pool(b)
	addWorkflow(b, pool, "raw")
	addWorkflow(b, pool, "ingest")
	node := anviltest.Start(b, anviltest.Options{})
	e := anviltest.DeployEmitter(b, node)
	for i := 0; i < txs; i++ {
		e.EmitMany(perTx, int64(i*perTx))
	}
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	if err != nil {
		b.Fatal(err)
	}

	for i := 0; i < b.N; i++ {
		// Raw ceiling.
		// The claims carry payloads shaped and sized like real Deposit
		// payloads, so the ceiling is for the same work.
		claims := make([]store.Claim, total)
		for j := range claims {
			d := chain.Decoded{Event: "Deposit", Address: e.Address, Block: uint64(j / perTx),
				BlockHash: common.BigToHash(big.NewInt(int64(j / perTx))), TxHash: common.BigToHash(big.NewInt(int64(j))),
				LogIndex: uint(j % perTx), Args: map[string]any{"sender": e.From.Hex(), "amount": big.NewInt(int64(j))}}
			payload, err := trigger.EventPayload{Event: d, Block: d.Block, Phase: string(chain.PhaseHead)}.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			claims[j] = store.Claim{Workflow: "raw", TriggerKey: fmt.Sprintf("%d:%d:%s:%d", i, anviltest.ChainID, d.TxHash.Hex(), d.LogIndex),
				TriggerKind: trigger.Event, Trigger: payload, ChainID: anviltest.ChainID, BlockNumber: int64(d.Block), BlockHash: d.BlockHash.Hex()}
		}
		start := time.Now()
		for j := 0; j < total; j += 500 {
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := store.ClaimRuns(ctx, tx, claims[j:j+500])
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		raw := float64(total) / time.Since(start).Seconds()

		// End to end.
		if _, err := pool.Exec(ctx, `DELETE FROM rflow.workflow_runs WHERE workflow_name = 'ingest'`); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `DELETE FROM indexer.cursors`); err != nil {
			b.Fatal(err)
		}
		net := chain.Network{Name: "local", ChainID: anviltest.ChainID, RPC: []string{node.URL},
			BlockPollInterval: 50 * time.Millisecond, MaxBlockRange: 2000}
		var runs atomic.Int64
		start = time.Now()
		stop := runChain(b, pool, chain.Config{Owner: fmt.Sprint("bench", i), Networks: []chain.Network{net},
			Events: []chain.EventTrigger{{Workflow: "ingest", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}},
			gate{runs: &runs})
		// The claims count once their transaction is about to commit; wait
		// for the cursor, which commits with them.
		for runs.Load() < total || !cursorAt(b, pool, int64(node.BlockNumber())) {
			time.Sleep(2 * time.Millisecond)
		}
		e2e := float64(total) / time.Since(start).Seconds()
		stop()
		if n := countRuns(b, pool, "ingest"); n != total {
			b.Fatalf("%d runs, want %d", n, total)
		}
		b.ReportMetric(e2e, "logs/s")
		b.ReportMetric(raw, "raw-claims/s")
		summary.add("logs/s from a node: bare gate claimer / bare gate", e2e, raw, 0)
		b.Logf("chain ingest: %d logs end to end at %.0f logs/s; raw batched claim ceiling %.0f claims/s (ratio %.2f)",
			total, e2e, raw, e2e/raw)
	}
}

// BenchmarkChainBlockToClaim measures the latency from a block being mined
// (the Deposit transaction accepted by an automining anvil) to its log's run
// being claimed, with a 100ms block poll interval.
func BenchmarkChainBlockToClaim(b *testing.B) {
	const samples = 100
	pool := storetest.Pool(b)
	addWorkflow(b, pool, "latency")
	node := anviltest.Start(b, anviltest.Options{})
	e := anviltest.DeployEmitter(b, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	if err != nil {
		b.Fatal(err)
	}
	poll := 100 * time.Millisecond
	net := chain.Network{Name: "local", ChainID: anviltest.ChainID, RPC: []string{node.URL}, BlockPollInterval: poll}
	claimed := make(chan time.Time, 1)
	stop := runChain(b, pool, chain.Config{Networks: []chain.Network{net},
		Events: []chain.EventTrigger{{Workflow: "latency", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}},
		gate{claimed: claimed})
	defer stop()
	e.Deposit(0) // warm up: the window exists and the trigger is running
	<-claimed
	for i := 0; i < b.N; i++ {
		lat := make([]time.Duration, 0, samples)
		for j := 0; j < samples; j++ {
			e.Send("deposit", big.NewInt(int64(j+1)))
			sent := time.Now()
			at := <-claimed
			lat = append(lat, at.Sub(sent))
			time.Sleep(time.Duration(j%10) * poll / 10) // spread the blocks across the poll cycle
		}
		slices.Sort(lat)
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.Logf("block -> claim latency over %d blocks (poll %s): p50 %s, p99 %s", samples, poll, p50, p99)
	}
}
