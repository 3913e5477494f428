package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const (
	relayerSends   = 300
	relayerWallets = 3
	// relayerWorkers is rflow's default (jobs.Config.Workers): a worker
	// waiting for its wallet's batch joins the next one, so under a burst
	// the batches grow with the workers.
	relayerWorkers = 50
)

// BenchmarkRelayerConfirmedSends measures sends per second through the
// relayer on anvil (automine), from the first queue call to every send
// confirmed, with sends spread over a few wallets. Side by side it
// measures a bare baseline on the same node: sign, eth_sendRawTransaction
// and poll for the receipt, the same number of transfers, one goroutine
// per wallet.
//
// The relayer is measured three ways in each round. The target row
// queues the sends as the engine does (jobs/step_send.go: each send in its
// own step's transaction, from relayerWorkers concurrent workers), so the
// relayer works while sends are still being queued. Two informational
// rows: all of them queued in one transaction, committed before the
// relayer sees any (that pattern pays for the whole queue serially up
// front; the figure of earlier sessions), and each queued from a River
// job of the relayer's own client, so queueing and sending share its
// relayerWorkers workers as they share the engine's.
//
// They alternate for benchRounds rounds (RFLOW_BENCH_ROUNDS to change
// it), so machine noise hits them alike; the figures printed are the
// medians, and each ratio is the median of its rounds' ratios against the
// same round's baseline.
func BenchmarkRelayerConfirmedSends(b *testing.B) {
	modes := []sendQueueing{queueLikeEngine, queueInOneTx, queueFromJobs}
	rates := make([][]float64, len(modes))  // by mode
	ratios := make([][]float64, len(modes)) // against the same round's baseline
	var rawRates []float64
	rounds := benchRounds
	if n, err := strconv.Atoi(os.Getenv("RFLOW_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for range b.N {
		for i := range rounds {
			raw := rawSendRate(b)
			rawRates = append(rawRates, raw)
			// The relayer passes take turns going first, so none always
			// follows the baseline.
			for k := range modes {
				m := (i + k) % len(modes)
				rate := relayerSendRate(b, modes[m])
				rates[m], ratios[m] = append(rates[m], rate), append(ratios[m], rate/raw)
			}
			fmt.Printf("  round: raw %.0f sends/s;", raw)
			for m, q := range modes {
				fmt.Printf(" relayer %s %.0f (%.2f);", q, rates[m][len(rates[m])-1], ratios[m][len(ratios[m])-1])
			}
			fmt.Println()
		}
	}
	rawRate := median(rawRates)
	b.ReportMetric(rawRate, "raw-sends/s")
	b.ReportMetric(median(rates[0]), "relayer-sends/s")
	b.ReportMetric(median(ratios[0]), "ratio")
	b.ReportMetric(median(rates[1]), "relayer-one-tx-sends/s")
	b.ReportMetric(median(ratios[1]), "one-tx-ratio")
	b.ReportMetric(median(rates[2]), "relayer-from-jobs-sends/s")
	b.ReportMetric(median(ratios[2]), "from-jobs-ratio")
	summary.addRatio("confirmed sends/s: relayer (queued as the engine does) / raw go-ethereum", median(rates[0]), rawRate, median(ratios[0]), 0.8)
	summary.addRatio("confirmed sends/s: relayer (all queued in one transaction) / raw", median(rates[1]), rawRate, median(ratios[1]), 0)
	summary.addRatio("confirmed sends/s: relayer (queued from River jobs) / raw", median(rates[2]), rawRate, median(ratios[2]), 0)
	fmt.Printf("raw sign+send+receipt/s: %.0f  (%d sends, %d wallets, %d rounds)\n", rawRate, relayerSends, relayerWallets, len(rawRates))
	for m, q := range modes {
		fmt.Printf("relayer confirmed sends/s, %s: %.0f  ratio: %.2f\n", q, median(rates[m]), median(ratios[m]))
	}
}

// sendQueueing is how a relayer pass queues its sends.
type sendQueueing int

const (
	// queueInOneTx queues every send in one transaction: the relayer sees
	// none of them before all are queued and committed.
	queueInOneTx sendQueueing = iota
	// queueLikeEngine queues each send in a transaction of its own from
	// relayerWorkers goroutines, as the engine's send steps do.
	queueLikeEngine
	// queueFromJobs queues each send from a River job of the relayer's
	// own client, in the transaction that completes the job: the engine's
	// send step, whose workers are the relayer's (one queue, one client,
	// relayerWorkers in all).
	queueFromJobs
)

func (q sendQueueing) String() string {
	switch q {
	case queueLikeEngine:
		return "queued as the engine does"
	case queueFromJobs:
		return "queued from River jobs"
	}
	return "queued in one transaction"
}

// queueOne queues the benchmark's send i in tx.
func queueOne(ctx context.Context, tx pgx.Tx, r *relayer.Relayer, i int) error {
	_, _, err := r.QueueTx(ctx, tx, relayer.Request{ExternalID: fmt.Sprintf("bench:%d", i),
		Wallet: fmt.Sprint("w", i%relayerWallets), ChainID: anviltest.ChainID,
		To: common.HexToAddress("0x000000000000000000000000000000000000bEEF"), Value: big.NewInt(1)})
	return err
}

// queueStepArgs is a job that queues send I (queueFromJobs).
type queueStepArgs struct {
	I int `json:"i"`
}

func (queueStepArgs) Kind() string { return "bench.queue_send" }

type queueStepWorker struct {
	river.WorkerDefaults[queueStepArgs]
	pool *pgxpool.Pool
	r    *relayer.Relayer
}

func (w *queueStepWorker) Work(ctx context.Context, job *river.Job[queueStepArgs]) error {
	// A transaction as the engine's step jobs open theirs (jobs: fencedTx).
	return store.BeginBatchedFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := queueOne(ctx, tx, w.r, job.Args.I); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// queueSends queues the benchmark's sends the way q says (queueFromJobs:
// it inserts the jobs that will).
func queueSends(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], r *relayer.Relayer, q sendQueueing) error {
	queue := func(tx pgx.Tx, i int) error { return queueOne(ctx, tx, r, i) }
	switch q {
	case queueInOneTx:
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for i := range relayerSends {
				if err := queue(tx, i); err != nil {
					return err
				}
			}
			return nil
		})
	case queueFromJobs:
		params := make([]river.InsertManyParams, relayerSends)
		for i := range params {
			params[i] = river.InsertManyParams{Args: queueStepArgs{I: i}}
		}
		_, err := client.InsertMany(ctx, params)
		return err
	}
	next := make(chan int, relayerSends)
	for i := range relayerSends {
		next <- i
	}
	close(next)
	errs := make(chan error, relayerWorkers)
	for range relayerWorkers {
		go func() {
			for i := range next {
				// A step's transaction, as the engine opens it (jobs: fencedTx).
				if err := store.BeginBatchedFunc(ctx, pool, func(tx pgx.Tx) error { return queue(tx, i) }); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range relayerWorkers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func relayerSendRate(b *testing.B, q sendQueueing) float64 { return relayerSendRateVia(b, q, nil) }

// relayerSendRateVia is relayerSendRate with the relayer's database
// connections made through via(url) when via is not nil (a latency
// proxy); the benchmark's own progress reads stay direct. after, when
// set, is called once every send is confirmed, with the time it took.
func relayerSendRateVia(b *testing.B, q sendQueueing, via func(url string) string, after ...func(time.Duration)) float64 {
	ctx := context.Background()
	// Each round's node and connections go when its pass ends (the
	// cleanups would keep them all to the benchmark's end, and three
	// passes a round of 60-connection pools exhaust Postgres).
	node := anviltest.Start(b, anviltest.Options{})
	defer node.Stop()
	eth := node.Client()
	trace := &stmtTimes{}
	url := storetest.URL(b)
	pool := tracedPoolAt(b, url, trace)
	defer pool.Close()
	direct := pool
	if via != nil {
		pool = tracedPoolAt(b, via(url), trace)
		defer pool.Close()
	}
	network := relayer.Backend(eth)
	var calls *rpcCalls
	var order *sendOrder
	if os.Getenv("RFLOW_BENCH_TRACE") != "" {
		calls = &rpcCalls{next: http.DefaultTransport}
		calls.reset()
		order = &sendOrder{next: calls, signer: types.LatestSignerForChainID(big.NewInt(anviltest.ChainID)),
			highest: map[common.Address]uint64{}}
		rc, err := rpc.DialOptions(ctx, node.URL, rpc.WithHTTPClient(&http.Client{Transport: order}))
		require.NoError(b, err)
		b.Cleanup(rc.Close)
		network = ethclient.NewClient(rc)
	}
	wallets := map[string]*relayer.Wallet{}
	for i := range relayerWallets {
		w, err := relayer.WalletFromKey(anviltest.DevKeys[i])
		require.NoError(b, err)
		wallets[fmt.Sprint("w", i)] = w
	}
	logger := slog.New(slog.DiscardHandler)
	if calls != nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	r, err := relayer.New(relayer.Config{Pool: pool, Wallets: wallets, Logger: logger,
		Networks: map[uint64]relayer.Backend{anviltest.ChainID: network}, PollInterval: 20 * time.Millisecond})
	require.NoError(b, err)
	workers := river.NewWorkers()
	r.AddWorkers(workers)
	river.AddWorker(workers, &queueStepWorker{pool: pool, r: r})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:        "river",
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: relayerWorkers}},
		Workers:       workers,
		FetchCooldown: benchCooldown, FetchPollInterval: 20 * time.Millisecond,
		Logger: logger,
	})
	require.NoError(b, err)
	require.NoError(b, client.Start(ctx))
	defer client.Stop(context.WithoutCancel(ctx))
	_, err = r.Recover(ctx)
	require.NoError(b, err)

	to := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	trace.reset()
	calls.reset()
	defer trace.print("relayer sends, " + q.String())
	defer calls.print(relayerSends)
	var cpu *cpuMeter
	var nodeStart, goStart time.Duration
	if order != nil {
		cpu, nodeStart, goStart = startCPU(ctx, pool), nodeCPU(), selfCPU()
	}
	if via == nil {
		// Through a proxy the handshakes would count as the sends' round trips.
		warmPool(b, pool)
	}
	start := time.Now()
	require.NoError(b, queueSends(ctx, pool, client, r, q))
	queued := time.Since(start)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var confirmed, final int
		require.NoError(b, direct.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'confirmed'),
			count(*) FILTER (WHERE status NOT IN ('pending', 'in_mempool', 'mined')) FROM relayer.transactions`).
			Scan(&confirmed, &final))
		if final == relayerSends {
			if confirmed != relayerSends {
				require.Failf(b, "relayer bench: not all confirmed", "%d/%d confirmed: %v", confirmed, relayerSends, unconfirmed(b, direct))
			}
			break
		}
		if time.Now().After(deadline) {
			require.Failf(b, "relayer bench: timed out", "%d/%d confirmed: %v", confirmed, relayerSends, unconfirmed(b, direct))
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	for _, f := range after {
		f(elapsed)
	}
	var toBroadcast, toFinal float64
	require.NoError(b, direct.QueryRow(ctx, `SELECT
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM broadcast_at - created_at)),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - broadcast_at))
		FROM relayer.transactions`).Scan(&toBroadcast, &toFinal))
	fmt.Printf("relayer p50 (%s): queue→broadcast %.0f ms, broadcast→confirmed %.0f ms; queueing took %.0f ms of %.0f\n",
		q, toBroadcast*1000, toFinal*1000, float64(queued.Microseconds())/1000, float64(elapsed.Microseconds())/1000)
	if order != nil {
		cpuPerSend("relayer", cpu, nodeStart, goStart)
		order.print()
		printRuns(b, direct)
		printWaits(b, direct)
	}
	bal, err := eth.BalanceAt(ctx, to, nil)
	require.NoError(b, err)
	require.Equal(b, int64(relayerSends), bal.Int64(), "each send exactly once")
	return float64(relayerSends) / elapsed.Seconds()
}

// warmPool opens all of pool's connections and leaves them idle, so that
// a pass does not time dialing Postgres: rflow's pool is warm in steady
// state, and 50 callers queueing at once on a cold pool spent 5–7 s in
// all waiting for new connections (pgxpool's AcquireDuration), a tenth of
// a second of the pass each.
func warmPool(b *testing.B, pool *pgxpool.Pool) {
	ctx := context.Background()
	conns := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	for range pool.Config().MaxConns - pool.Stat().AcquiredConns() {
		c, err := pool.Acquire(ctx)
		require.NoError(b, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// unconfirmed lists the sends that are not confirmed, for a failure message.
func unconfirmed(b *testing.B, pool *pgxpool.Pool) []string {
	rows, err := pool.Query(context.Background(), `SELECT external_id || ' ' || status || ' nonce ' ||
			coalesce(nonce::text, '-') || ': ' || coalesce(error, '') FROM relayer.transactions
		WHERE status <> 'confirmed' ORDER BY id LIMIT 20`)
	require.NoError(b, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(b, err)
	return out
}

// rawSendRate is the baseline: what a client does without any durability.
func rawSendRate(b *testing.B) float64 {
	ctx := context.Background()
	node := anviltest.Start(b, anviltest.Options{})
	defer node.Stop()
	eth := node.Client()
	to := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	signer := types.LatestSignerForChainID(big.NewInt(anviltest.ChainID))
	if os.Getenv("RFLOW_BENCH_TRACE") != "" {
		defer cpuPerSend("raw", nil, nodeCPU(), selfCPU())
	}
	start := time.Now()
	errs := make(chan error, relayerWallets)
	for w := range relayerWallets {
		go func() {
			key, err := crypto.HexToECDSA(anviltest.DevKeys[w])
			if err != nil {
				errs <- err
				return
			}
			from := crypto.PubkeyToAddress(key.PublicKey)
			nonce, err := eth.PendingNonceAt(ctx, from)
			if err != nil {
				errs <- err
				return
			}
			for i := w; i < relayerSends; i += relayerWallets {
				head, err := eth.HeaderByNumber(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				tip := big.NewInt(1_000_000_000)
				tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{ChainID: big.NewInt(anviltest.ChainID),
					Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip),
					Gas: 21000, To: &to, Value: big.NewInt(1)})
				if err != nil {
					errs <- err
					return
				}
				if err := eth.SendTransaction(ctx, tx); err != nil {
					errs <- err
					return
				}
				for {
					_, err := eth.TransactionReceipt(ctx, tx.Hash())
					if err == nil {
						break
					}
					if err != ethereum.NotFound {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond)
				}
				nonce++
			}
			errs <- nil
		}()
	}
	for range relayerWallets {
		require.NoError(b, <-errs)
	}
	return float64(relayerSends) / time.Since(start).Seconds()
}

// sendOrder is an HTTP transport (RFLOW_BENCH_TRACE) that watches the
// eth_sendRawTransaction calls going through it: how often a wallet's
// transaction reaches the node after one of the same wallet at a higher
// nonce (out of nonce order).
type sendOrder struct {
	next    http.RoundTripper
	signer  types.Signer
	mu      sync.Mutex
	highest map[common.Address]uint64
	sends   int
	behind  int
}

func (o *sendOrder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var call struct {
			Method string
			Params []string
		}
		if json.Unmarshal(body, &call) == nil && call.Method == "eth_sendRawTransaction" && len(call.Params) == 1 {
			o.note(call.Params[0])
		}
	}
	return o.next.RoundTrip(req)
}

func (o *sendOrder) note(rawHex string) {
	raw, err := hexutil.Decode(rawHex)
	if err != nil {
		return
	}
	tx := new(types.Transaction)
	if tx.UnmarshalBinary(raw) != nil {
		return
	}
	from, err := types.Sender(o.signer, tx)
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sends++
	if h, ok := o.highest[from]; ok && tx.Nonce() < h {
		o.behind++
	}
	if h, ok := o.highest[from]; !ok || tx.Nonce() > h {
		o.highest[from] = tx.Nonce()
	}
}

func (o *sendOrder) print() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Printf("  eth_sendRawTransaction: %d, %d reached the node after a higher nonce of the same wallet\n", o.sends, o.behind)
}

// printRuns reports how many sends finished in their job's first run (River
// fetched the job once: no snooze, no retry) and how many needed more.
func printRuns(b *testing.B, pool *pgxpool.Pool) {
	var first, later, maxRuns int
	require.NoError(b, pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE cardinality(attempted_by) = 1),
			count(*) FILTER (WHERE cardinality(attempted_by) > 1),
			coalesce(max(cardinality(attempted_by)), 0)
		FROM river.river_job WHERE kind = 'relayer_send'`).Scan(&first, &later, &maxRuns))
	fmt.Printf("  relayer_send jobs: %d final in their first run, %d needed more (at most %d runs)\n", first, later, maxRuns)
}

// printWaits splits a send's p50 wait from queued to broadcast into its
// job's wait to be fetched (River's attempted_at) and the rest (the
// estimate, fees and the wallet's batch).
func printWaits(b *testing.B, pool *pgxpool.Pool) {
	var fetch, rest float64
	require.NoError(b, pool.QueryRow(context.Background(), `SELECT
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.attempted_at - t.created_at)),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.broadcast_at - j.attempted_at))
		FROM relayer.transactions t JOIN river.river_job j ON j.id = t.job_id`).Scan(&fetch, &rest))
	fmt.Printf("  p50 queued→job fetched %.0f ms, fetched→broadcast %.0f ms\n", fetch*1000, rest*1000)
	var hold, busy float64
	require.NoError(b, pool.QueryRow(context.Background(), `SELECT
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finalized_at - attempted_at)),
			sum(extract(epoch FROM finalized_at - attempted_at)) / extract(epoch FROM max(finalized_at) - min(attempted_at))
		FROM river.river_job WHERE kind = 'relayer_send'`).Scan(&hold, &busy))
	fmt.Printf("  relayer_send jobs: p50 fetched→finalized %.0f ms, %.1f running on average\n", hold*1000, busy)
}

// nodeCPU is the CPU time, so far, of the newest anvil this process
// started (RFLOW_BENCH_TRACE): where the node's share of a round goes.
// It returns -1 where /proc cannot tell.
func nodeCPU() time.Duration {
	entries, _ := os.ReadDir("/proc")
	best, bestStart := -1, int64(-1)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil || len(f) < 20 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "anvil" {
			continue
		}
		if started, _ := strconv.ParseInt(f[19], 10, 64); started > bestStart || (started == bestStart && pid > best) {
			best, bestStart = pid, started
		}
	}
	if best < 0 {
		return -1
	}
	f, _ := procStat(best)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// cpuPerSend prints the CPU one send cost this process, Postgres and
// anvil since the readings taken at the start.
func cpuPerSend(what string, cpu *cpuMeter, nodeStart, goStart time.Duration) {
	goCPU, pgCPU := cpu.perUnit(relayerSends)
	if cpu == nil {
		goCPU = (selfCPU() - goStart) / relayerSends
	}
	fmt.Printf("  %s CPU per send: go %.2f ms, postgres %.2f ms, anvil %.2f ms\n", what,
		float64(goCPU.Microseconds())/1000, float64(pgCPU.Microseconds())/1000,
		float64(((nodeCPU()-nodeStart)/relayerSends).Microseconds())/1000)
}
