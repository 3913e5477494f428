package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
)

// temporalVersion is the Temporal CLI the Makefile's temporal target
// builds (its dev server is Temporal Server 1.29.1); bench/temporal pins
// the Go SDK that CLI was built with.
const temporalVersion = "v1.5.1"

// temporalBinary is RFLOW_TEMPORAL, or the CLI `make temporal` cached
// under .tools; "" when neither exists.
func temporalBinary() string {
	p := os.Getenv("RFLOW_TEMPORAL")
	if p == "" {
		root, err := anviltest.ModuleRoot()
		if err != nil {
			return ""
		}
		p = filepath.Join(root, ".tools", "temporal-"+temporalVersion, "temporal")
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// startTemporal runs `temporal server start-dev` (in memory, no UI) and
// waits until its frontend accepts connections; it returns that address.
func startTemporal(b *testing.B, bin string, extra ...string) string {
	port := anviltest.FreePort(b)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", fmt.Sprint(port),
		"--http-port", fmt.Sprint(anviltest.FreePort(b)), "--metrics-port", fmt.Sprint(anviltest.FreePort(b)),
		"--log-level", "error")
	cmd.Args = append(cmd.Args, extra...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("temporal server start-dev not listening on %s after 2m: %s", addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildTemporalDriver builds bench/temporal (its own module: the SDK is
// no dependency of rflow's).
func buildTemporalDriver(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "temporalbench")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = "temporal"
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build bench/temporal: %v\n%s", err, out)
	}
	return bin
}

// temporalSide runs the driver against addr: n workflows of three
// activities, each a POST to url, started by clients concurrent clients.
// A workflow is done when its client's Get returned.
func temporalSide(b *testing.B, driver, addr string, ep *endpoint, n, clients, pollers int) peerSide {
	cmd := exec.Command(driver, "-address", addr, "-url", ep.URL, "-n", fmt.Sprint(n), "-concurrency", fmt.Sprint(clients),
		"-pollers", fmt.Sprint(pollers))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		Started, Done []int64
		Failed        int
		Error         string
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil {
		b.Fatalf("temporal driver: %v %v %s\n%s", err, jerr, out, stderr.String())
	}
	s := peerSide{started: make([]time.Time, n), done: make([]time.Time, n), third: make([]time.Time, n)}
	for i := range n {
		s.started[i], s.done[i] = time.Unix(0, res.Started[i]), time.Unix(0, res.Done[i])
	}
	// The workflow ids are "bench-<ns>-<i>".
	ep.mu.Lock()
	for id, t := range ep.third {
		if k := strings.LastIndexByte(id, '-'); strings.HasPrefix(id, "bench-") && k > 0 {
			var i int
			if _, err := fmt.Sscan(id[k+1:], &i); err == nil && i < n {
				s.third[i] = t
			}
		}
	}
	ep.mu.Unlock()
	for i, t := range s.third {
		require.False(b, t.IsZero(), "temporal workflow %d done without its third call", i)
	}
	return s
}

// BenchmarkPeerTemporal runs the same workflow on rflow and on Temporal,
// side by side on this machine: three steps, each an HTTP POST to a local
// endpoint; 1,000 workflows started as fast as 50 clients can (rflow: a
// webhook POST each to a real `rflow start`, default settings; Temporal:
// ExecuteWorkflow against `temporal server start-dev`, in memory, with a
// worker of default options). It reports workflows per second and p50 and
// p99 from start to done for both. Skipped when the Temporal CLI is not
// built (`make temporal`).
func BenchmarkPeerTemporal(b *testing.B) {
	bin := temporalBinary()
	if bin == "" {
		b.Skipf("temporal %s not found: run `make temporal` (builds github.com/temporalio/cli from the module proxy into .tools) or set RFLOW_TEMPORAL", temporalVersion)
	}
	driver := buildTemporalDriver(b)
	rflowBin := buildRflow(b)
	addr := startTemporal(b, bin)
	// The dev server's task queues have 4 partitions and the SDK's worker
	// 2 pollers of each kind: a task written to a partition no poller is
	// on waits to be forwarded (0.7–4 s on this machine), and each poll
	// brings one task. As informational figures, Temporal tuned for this
	// load: one partition and 16 pollers of each kind.
	tuned := startTemporal(b, bin, "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1")
	var r, t, t1 peerSide
	for range b.N {
		ep := newEndpoint(b)
		api, pool := startRflowHTTP(b, rflowBin, ep.URL)
		r = rflowSide(b, api, pool, ep, peerWorkflows, peerClients)
		t = temporalSide(b, driver, addr, newEndpoint(b), peerWorkflows, peerClients, 0)
		t1 = temporalSide(b, driver, tuned, newEndpoint(b), peerWorkflows, peerClients, 16)
	}
	rp50, rp99 := r.latencies(r.done)
	tp50, tp99 := t.latencies(t.done)
	r3p50, r3p99 := r.latencies(r.third)
	t3p50, t3p99 := t.latencies(t.third)
	fmt.Printf("peer, %d workflows of 3 HTTP steps by %d clients:\n", peerWorkflows, peerClients)
	fmt.Printf("  rflow:    %.0f workflows/s, start→done p50 %s p99 %s, start→third call p50 %s p99 %s\n",
		r.rate(), ms(rp50), ms(rp99), ms(r3p50), ms(r3p99))
	fmt.Printf("  temporal: %.0f workflows/s, start→done p50 %s p99 %s, start→third call p50 %s p99 %s\n",
		t.rate(), ms(tp50), ms(tp99), ms(t3p50), ms(t3p99))
	t1p50, t1p99 := t1.latencies(t1.done)
	fmt.Printf("  temporal, 1 task queue partition, 16 pollers: %.0f workflows/s, start→done p50 %s p99 %s\n", t1.rate(), ms(t1p50), ms(t1p99))
	b.ReportMetric(r.rate(), "rflow-workflows/s")
	b.ReportMetric(t.rate(), "temporal-workflows/s")
	summary.add("workflows/s: rflow / Temporal dev server", r.rate(), t.rate(), 3)
	summary.add("start→done p50 ms: Temporal / rflow", float64(tp50.Milliseconds()), float64(rp50.Milliseconds()), 1)
	summary.add("start→done p99 ms: Temporal / rflow", float64(tp99.Milliseconds()), float64(rp99.Milliseconds()), 0)
	summary.add("workflows/s: rflow / Temporal tuned (1 partition, 16 pollers)", r.rate(), t1.rate(), 0)
	summary.add("start→done p50 ms: Temporal tuned / rflow", float64(t1p50.Milliseconds()), float64(rp50.Milliseconds()), 0)
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
