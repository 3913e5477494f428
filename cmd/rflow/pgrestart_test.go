package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// overlapSink is an endpoint whose /slow path answers after a delay. It
// counts deliveries per Idempotency-Key and records every key delivered
// again while an earlier delivery of it was still being answered: the
// same step running twice at the same time.
type overlapSink struct {
	*httptest.Server
	mu       sync.Mutex
	inflight map[string]int
	seen     map[string]int
	overlaps []string
}

func newOverlapSink(t *testing.T, delay time.Duration) *overlapSink {
	s := &overlapSink{inflight: map[string]int{}, seen: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		if s.inflight[key] > 0 {
			s.overlaps = append(s.overlaps, key)
		}
		s.inflight[key]++
		s.seen[key]++
		s.mu.Unlock()
		if r.URL.Path == "/slow" {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
		}
		s.mu.Lock()
		s.inflight[key]--
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// active is how many requests are being answered right now.
func (s *overlapSink) active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.inflight {
		n += v
	}
	return n
}

func (s *overlapSink) deliveries() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.seen))
	for k, v := range s.seen {
		out[k] = v
	}
	return out
}

func (s *overlapSink) concurrentDuplicates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.overlaps...)
}

func (s *overlapSink) waitActive(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.active() >= n }, 60*time.Second, 20*time.Millisecond,
		"never %d steps in flight at once", n)
}

const restartProject = `
name: restart
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: a
        http_call: { method: POST, url: "%[1]s/slow" }
      - id: b
        http_call: { method: POST, url: "%[1]s/fast" }
`

// sendingProject adds a send between the two calls.
const sendingProject = `
name: restart
networks:
  - { name: local, chain_id: 31337, rpc: %[2]q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: %[3]q }
workflows:
  - name: pipeline
    trigger: { manual: {} }
    steps:
      - id: a
        http_call: { method: POST, url: "%[1]s/slow" }
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}" }
      - id: b
        http_call: { method: POST, url: "%[1]s/fast" }
`

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

// requireAlive fails the test if `rflow start` has exited.
func (p *proc) requireAlive(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("rflow start exited (%v); output:\n%s", p.cmd.ProcessState, p.out)
	default:
	}
}

// TestPostgresRestartUnderLiveStart restarts Postgres (fast and immediate)
// while a live `rflow start` has 30 steps in flight. The process must take
// its liveness lock back instead of rescuing its own running jobs, so no
// step is delivered twice at the same time and every run completes; and
// because it registered again, a `kill -9` of it afterwards is rescued at
// once by the next process instead of after River's stuck-job timeout.
func TestPostgresRestartUnderLiveStart(t *testing.T) {
	t.Parallel()
	for _, mode := range []store.ShutdownMode{store.ShutdownFast, store.ShutdownImmediate} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := storetest.NewCluster(t)
			pool, err := pgxpool.New(ctx, c.URL())
			require.NoError(t, err)
			defer pool.Close()
			s := newOverlapSink(t, 8*time.Second)
			config := writeConfig(t, fmt.Sprintf(restartProject, s.URL))
			const runs = 30
			enqueueManual(t, pool, config, runs)
			// Spare workers: a rescued job would be fetched again at once.
			p := startRflowWorkers(t, c.URL(), config, "", 2*runs)
			s.waitActive(t, runs)
			c.Restart(t, mode, 0)
			done := waitAllDone(t, pool, runs, 90*time.Second)
			require.Len(t, done, runs)
			p.requireAlive(t)
			require.Empty(t, s.concurrentDuplicates(), "steps delivered twice at the same time")

			// Later, the same process dies with steps in flight: its
			// liveness row is back, so the next process rescues them at
			// its boot pass, well before River's 5-minute rescuer.
			enqueueManualKeys(t, pool, config, "k", 10)
			s.waitActive(t, 10)
			p.kill()
			killed := time.Now()
			before := s.deliveries()
			next := startRflowWorkers(t, c.URL(), config, "", 2*runs)
			require.Eventually(t, func() bool {
				for k, n := range s.deliveries() {
					if before[k] > 0 && n > before[k] {
						return true
					}
				}
				return false
			}, 5*time.Second, 20*time.Millisecond, "no step of the killed process resumed within 5 s")
			t.Logf("%s: first step of the killed process resumed %s after the kill", mode, time.Since(killed).Round(10*time.Millisecond))
			waitAllDone(t, pool, runs+10, 30*time.Second)
			next.stop(t)
			require.Empty(t, s.concurrentDuplicates(), "steps delivered twice at the same time")
		})
	}
}

// outage is how long the outage tests keep Postgres or the RPC node away:
// short in the normal suite, as the issue describes under RFLOW_SOAK.
func outage(soak time.Duration) time.Duration {
	if os.Getenv("RFLOW_SOAK") != "" {
		return soak
	}
	return 5 * time.Second
}

// TestPostgresOutageUnderLiveStart takes Postgres away in the middle of
// steps and sends. `rflow start` must not exit: it waits, resumes when the
// database is back, completes every run, and sends each transaction once.
func TestPostgresOutageUnderLiveStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	_, from := anviltest.Key(t, 3)
	c := storetest.NewCluster(t)
	pool, err := pgxpool.New(ctx, c.URL())
	require.NoError(t, err)
	defer pool.Close()
	s := newOverlapSink(t, 2*time.Second)
	config := writeConfig(t, fmt.Sprintf(sendingProject, s.URL, node.URL, "0x"+anviltest.DevKeys[3]))
	before, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)

	const runs = 10
	enqueueManual(t, pool, config, runs)
	// Spare workers: a job wrongly rescued would be fetched again at once.
	p := startRflowWorkers(t, c.URL(), config, "", 4*runs)
	s.waitActive(t, runs)
	// A second batch starts its slow call while the first is at its send.
	enqueueManualKeys(t, pool, config, "late", runs)
	s.waitActive(t, runs)
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions`).Scan(&n) == nil && n > 0
	}, 60*time.Second, 10*time.Millisecond, "no send in flight")
	c.Restart(t, store.ShutdownFast, outage(30*time.Second))
	p.requireAlive(t)
	done := waitAllDone(t, pool, 2*runs, 3*time.Minute)
	require.Len(t, done, 2*runs)
	p.requireAlive(t)
	p.stop(t)
	require.Empty(t, s.concurrentDuplicates(), "steps delivered twice at the same time")
	requireOneSendEach(t, pool, node, from, before, 2*runs)
}

func requireOneSendEach(t *testing.T, pool *pgxpool.Pool, node *anviltest.Node, from [20]byte, before uint64, sends int) {
	t.Helper()
	after, err := node.Client().NonceAt(context.Background(), from, nil)
	require.NoError(t, err)
	require.Equal(t, before+uint64(sends), after, "exactly one transaction per send")
	var txs int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM relayer.transactions WHERE status = 'confirmed'`).Scan(&txs))
	require.Equal(t, sends, txs)
}

// TestRPCOutageUnderLiveStart cuts the RPC node off (a TCP proxy that
// refuses connections) in the middle of sends. `rflow start` must not
// exit; the sends resume when the node is back and each goes out once.
func TestRPCOutageUnderLiveStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	proxy := newTCPProxy(t, node.URL)
	_, from := anviltest.Key(t, 4)
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	s := newOverlapSink(t, 500*time.Millisecond)
	config := writeConfig(t, fmt.Sprintf(sendingProject, s.URL, proxy.URL(), "0x"+anviltest.DevKeys[4]))
	before, err := node.Client().NonceAt(ctx, from, nil)
	require.NoError(t, err)

	const runs = 10
	enqueueManual(t, pool, config, runs)
	p := startRflowWorkers(t, dbURL, config, "", runs)
	// Cut the node off once some sends are in flight.
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM relayer.transactions`).Scan(&n) == nil && n > 0
	}, 60*time.Second, 10*time.Millisecond)
	proxy.cut()
	time.Sleep(outage(20 * time.Second))
	p.requireAlive(t)
	proxy.restore(t)
	done := waitAllDone(t, pool, runs, 3*time.Minute)
	require.Len(t, done, runs)
	p.requireAlive(t)
	p.stop(t)
	require.Empty(t, s.concurrentDuplicates())
	requireOneSendEach(t, pool, node, from, before, runs)
}

// tcpProxy forwards a loopback port to an HTTP node. cut closes the port
// and every connection through it, as a network outage would; restore
// opens the same port again.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newTCPProxy(t *testing.T, targetURL string) *tcpProxy {
	t.Helper()
	var host string
	_, err := fmt.Sscanf(targetURL, "http://%s", &host)
	require.NoError(t, err)
	p := &tcpProxy{target: host, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) URL() string { return "http://" + p.addr }

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}
