package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// rpcCalls is an HTTP transport that counts the JSON-RPC methods sent
// through it (RFLOW_BENCH_TRACE): where a benchmark's node calls go.
type rpcCalls struct {
	next  http.RoundTripper
	mu    sync.Mutex
	count map[string]int
	reqs  map[string]int // HTTP requests carrying the method (a batch counts once per method in it)
	took  map[string]time.Duration
	posts int
}

func (c *rpcCalls) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var one struct{ Method string }
		var many []struct{ Method string }
		method := "batch"
		if json.Unmarshal(body, &one) == nil {
			method = one.Method
		}
		c.mu.Lock()
		c.posts++
		if json.Unmarshal(body, &many) == nil {
			seen := map[string]bool{}
			for _, m := range many {
				c.count[m.Method]++
				if !seen[m.Method] {
					seen[m.Method] = true
					c.reqs[m.Method]++
				}
			}
		} else {
			c.count[method]++
			c.reqs[method]++
		}
		c.mu.Unlock()
		start := time.Now()
		resp, err := c.next.RoundTrip(req)
		c.mu.Lock()
		c.took[method] += time.Since(start)
		c.mu.Unlock()
		return resp, err
	}
	return c.next.RoundTrip(req)
}

func (c *rpcCalls) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count, c.reqs, c.took, c.posts = map[string]int{}, map[string]int{}, map[string]time.Duration{}, 0
}

// print lists the calls per method, and per unit of work (n of them).
func (c *rpcCalls) print(n int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	methods := make([]string, 0, len(c.count))
	for m := range c.count {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	fmt.Printf("  json-rpc: %d HTTP requests (%.2f per send)\n", c.posts, float64(c.posts)/float64(n))
	for _, m := range methods {
		fmt.Printf("    %-28s %6d  %.2f per send  %6.1f ms each  in %d requests\n", m, c.count[m], float64(c.count[m])/float64(n),
			float64(c.took[m].Microseconds())/1000/float64(max(c.count[m], 1)), c.reqs[m])
	}
}
