package chain_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
)

// tcpCountingProxy forwards TCP connections to upstream (host:port) and counts
// how many it accepted.
func tcpCountingProxy(t *testing.T, upstream string, accepted *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); out.Close() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestConcurrentCallsReuseConnections: concurrent calls through one Client
// (the relayer's workers share one per network) reuse their connections to
// the node instead of opening one per call beyond the second (net/http's
// default idle limit), which on https is a TLS handshake per call.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	node := anviltest.Start(t, anviltest.Options{})
	var accepted atomic.Int64
	url := tcpCountingProxy(t, strings.TrimPrefix(node.URL, "http://"), &accepted)
	c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{url}})
	require.NoError(t, err)
	defer c.Close()
	const workers, calls = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*calls)
	for range workers {
		wg.Go(func() {
			for range calls {
				if _, err := c.Eth().BlockNumber(context.Background()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// A call may dial while another's connection is on its way back to
	// idle, so a few more than one per goroutine; without reuse it is one
	// per call beyond the second concurrent one (over a hundred here).
	require.LessOrEqual(t, accepted.Load(), int64(2*workers),
		"%d calls from %d goroutines opened %d connections", workers*calls, workers, accepted.Load())
}
