package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// remoteRTT is the round-trip time the remote-database benchmark puts
// between rflow and Postgres.
const remoteRTT = time.Millisecond

// latencyProxy is a TCP proxy in front of Postgres that holds every chunk
// of bytes for half the round-trip time in each direction, in order: a
// database one network hop away, made in user space because this kernel
// has no netem qdisc (see BENCHMARKS.md). It also counts round trips: a
// turn is a client write that follows a server reply (or opens the
// connection), which is what a pgx round trip is, a pipelined batch being
// one.
type latencyProxy struct {
	ln     net.Listener
	target string
	half   time.Duration
	turns  atomic.Int64
	wg     sync.WaitGroup
}

// startLatencyProxy proxies dbURL's host with the given round-trip time
// and returns the proxy and dbURL pointed at it.
func startLatencyProxy(b *testing.B, dbURL string, rtt time.Duration) (*latencyProxy, string) {
	u, err := url.Parse(dbURL)
	require.NoError(b, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	p := &latencyProxy{ln: ln, target: u.Host, half: rtt / 2}
	p.wg.Add(1)
	go p.accept()
	b.Cleanup(func() { ln.Close(); p.wg.Wait() })
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *latencyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		// replied is set when the server has written since the client
		// last did: the client's next write starts a round trip.
		var replied atomic.Bool
		replied.Store(true)
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.pipe(s, c, func() {
				if replied.Swap(false) {
					p.turns.Add(1)
				}
			})
		}()
		go func() { defer p.wg.Done(); p.pipe(c, s, func() { replied.Store(true) }) }()
	}
}

// pipe copies src to dst, each chunk held for p.half; seen is called as
// each chunk is read.
func (p *latencyProxy) pipe(dst, src net.Conn, seen func()) {
	type chunk struct {
		data []byte
		at   time.Time
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				break
			}
		}
		dst.Close()
		for range q { // drain, so the reader never blocks
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			seen()
			q <- chunk{data: append([]byte(nil), buf[:n]...), at: time.Now().Add(p.half)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				_ = err // a reset connection ends the pipe like EOF
			}
			break
		}
	}
	close(q)
	<-done
	src.Close()
}

// BenchmarkRemoteDatabase is `rflow start` with Postgres 1 ms away (a
// latency proxy): steps per second on 600 queued 3-step http_call runs at
// 1 ms against the same on a direct connection, in the same run, and the
// database round trips per step and per 500-claim batch (counted by the
// proxy: everything the process sends, River's polls and the chain head's
// included).
func BenchmarkRemoteDatabase(b *testing.B) {
	bin := buildRflow(b)
	srv := benchServer(b)
	const runs = 600
	var local, remote float64
	var stepTurns, claimTurns, sendTurns float64
	for range b.N {
		// Steps, direct.
		db, pool, config := queueRuns(b, srv.URL, runs)
		start := time.Now()
		startRflow(b, bin, db, config)
		waitCount(b, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`, runs)
		local = float64(3*runs) / time.Since(start).Seconds()
		// Steps, 1 ms away.
		db, pool, config = queueRuns(b, srv.URL, runs)
		proxy, far := startLatencyProxy(b, db, remoteRTT)
		start = time.Now()
		startRflow(b, bin, far, config)
		waitCount(b, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE status = 'completed'`, runs)
		elapsed := time.Since(start)
		remote = float64(3*runs) / elapsed.Seconds()
		busy := proxy.turns.Load()
		idle := idleTurnsPerSecond(proxy)
		stepTurns = (float64(busy) - idle*elapsed.Seconds()) / float64(3*runs)
		fmt.Printf("  steps/s: direct %.0f, %s away %.0f (%.2f); %d round trips in %s, %.0f a second when idle: %.1f per step\n",
			local, remoteRTT, remote, remote/local, busy, elapsed.Round(time.Millisecond), idle, stepTurns)
		claimTurns = remoteClaimTurns(b, bin)
		sendTurns = remoteSendTurns(b)
	}
	b.ReportMetric(local, "steps/s-direct")
	b.ReportMetric(remote, "steps/s-1ms")
	b.ReportMetric(stepTurns, "round-trips/step")
	b.ReportMetric(claimTurns, "round-trips/claim-batch")
	b.ReportMetric(sendTurns, "round-trips/send")
	summary.add(fmt.Sprintf("steps/s: Postgres %s away / direct", remoteRTT), remote, local, 0.5)
	summary.addAbs("database round trips per step (1 ms away)", stepTurns, "", "counted", true)
	summary.addAbs("database round trips per 500 claims (1 ms away)", claimTurns, "", "counted", true)
	summary.addAbs("database round trips per confirmed send (1 ms away)", sendTurns, "", "counted", true)
}

// remoteClaimTurns is the round trips `rflow start` makes per 500 claims
// on a backlog of 20,000 Deposit logs with Postgres 1 ms away, from start
// to the last run (the cursor's transactions and start-up included).
func remoteClaimTurns(b *testing.B, bin string) float64 {
	const perTx, txs = 2000, 10
	config := backlogProject(b, perTx, txs)
	db := storetest.URL(b)
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(b, err)
	defer pool.Close()
	proxy, far := startLatencyProxy(b, db, remoteRTT)
	var turns float64
	_, rate, _ := rflowStartClaimsThen(b, pool, bin, far, config, perTx*txs, func(elapsed time.Duration) {
		busy := proxy.turns.Load()
		idle := idleTurnsPerSecond(proxy)
		turns = (float64(busy) - idle*elapsed.Seconds()) / float64(perTx*txs/500)
		fmt.Printf("  claims, Postgres %s away: %d round trips in %s, %.0f a second when idle\n", remoteRTT, busy, elapsed.Round(time.Millisecond), idle)
	})
	fmt.Printf("  claims, Postgres %s away: %.0f runs/s, %.1f round trips per 500 claims (idle ones taken out)\n", remoteRTT, rate, turns)
	return turns
}

// idleTurnsPerSecond is the round trips a second an idle process makes
// (River's polls, leadership, the chain head), over the next two seconds.
func idleTurnsPerSecond(p *latencyProxy) float64 {
	const d = 2 * time.Second
	n := p.turns.Load()
	time.Sleep(d)
	return float64(p.turns.Load()-n) / d.Seconds()
}

// remoteSendTurns is the relayer benchmark's sends (300 over 3 wallets, on
// anvil) with the relayer's database 1 ms away: round trips per confirmed
// send, queueing included, idle ones (River's and the monitor's polls)
// taken out.
func remoteSendTurns(b *testing.B) float64 {
	var proxy *latencyProxy
	var turns float64
	rate := relayerSendRateVia(b, queueInOneTx, func(url string) string {
		p, far := startLatencyProxy(b, url, remoteRTT)
		proxy = p
		return far
	}, func(elapsed time.Duration) {
		busy := proxy.turns.Load()
		idle := idleTurnsPerSecond(proxy)
		turns = (float64(busy) - idle*elapsed.Seconds()) / relayerSends
		fmt.Printf("  sends, Postgres %s away: %d round trips in %s, %.0f a second when idle\n", remoteRTT, busy, elapsed.Round(time.Millisecond), idle)
	})
	fmt.Printf("  sends, Postgres %s away: %.0f confirmed sends/s, %.1f round trips per send\n", remoteRTT, rate, turns)
	return turns
}
