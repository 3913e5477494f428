// Package rpcproxy is a JSON-RPC fault proxy for tests: it sits on loopback
// in front of a real node (anvil or geth) and behaves as hosted providers
// and load-balanced nodes do when they are not a single healthy node:
// eth_getLogs range and result caps with the providers' own error texts,
// batch caps (refused whole, refused geth's way, or answered only in
// part), HTTP 429 with Retry-After, a node lagging blocks behind, and
// dropped connections. The faults are set per test and can change while
// the proxy runs; every call is counted by method, so a test asserts what
// its code sent, not only what it ended with.
//
//	p := rpcproxy.Start(t, node.URL)
//	p.Set(rpcproxy.Faults{RangeLimit: 5, RangeStyle: rpcproxy.AlchemyRange, BatchLimit: 10})
//	// ... point the code under test at p.URL ...
//	require.Positive(t, p.Refused(rpcproxy.RefusedRange))
package rpcproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// Refusal names a fault the proxy injected, for Proxy.Refused.
type Refusal string

// The refusals a Proxy counts.
const (
	RefusedRange     Refusal = "range"     // eth_getLogs over RangeLimit blocks
	RefusedResults   Refusal = "results"   // eth_getLogs over ResultLimit logs
	RefusedBatch     Refusal = "batch"     // a batch over BatchLimit calls
	RefusedThrottle  Refusal = "throttle"  // HTTP 429
	RefusedLag       Refusal = "lag"       // an answer from the lagging node
	RefusedDropped   Refusal = "dropped"   // a connection closed unanswered
	RefusedTruncated Refusal = "truncated" // calls of a batch left unanswered
	RefusedMethod    Refusal = "method"    // a call of a method in Faults.Refuse
)

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is the proxy's HTTP JSON-RPC endpoint.
	URL string

	upstream string
	client   *http.Client

	mu       sync.Mutex
	faults   Faults
	requests int
	calls    map[string]int
	relayed  map[string]int
	batches  []int
	refused  map[Refusal]int
}

// Start starts a proxy in front of the node at upstream (an HTTP JSON-RPC
// URL) and stops it when the test ends.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p := &Proxy{upstream: upstream, client: &http.Client{}, calls: map[string]int{}, relayed: map[string]int{}, refused: map[Refusal]int{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Set replaces the faults. A Refuse map set here is the proxy's until the
// next Set or Update.
func (p *Proxy) Set(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Update changes the faults in place.
func (p *Proxy) Update(fn func(*Faults)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(&p.faults)
}

// Calls is how many calls of method the proxy received, alone or in
// batches, refused ones included.
func (p *Proxy) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// Relayed is how many calls of method the proxy passed on to the node
// (the ones it refused or answered itself are not).
func (p *Proxy) Relayed(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.relayed[method]
}

// Batches lists the sizes of the batches received, in order.
func (p *Proxy) Batches() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.batches...)
}

// Refused is how many times the proxy injected fault r.
func (p *Proxy) Refused(r Refusal) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[r]
}

func (p *Proxy) count(r Refusal, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused[r] += n
}

// call is one JSON-RPC request object.
type call struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// ServeHTTP relays one HTTP request, a call or a batch, with the faults.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	isBatch := len(bytes.TrimSpace(body)) > 0 && bytes.TrimSpace(body)[0] == '['
	var calls []call
	if isBatch {
		err = json.Unmarshal(body, &calls)
	} else {
		calls = make([]call, 1)
		err = json.Unmarshal(body, &calls[0])
	}
	if err != nil {
		http.Error(w, "rpcproxy: not JSON-RPC: "+err.Error(), http.StatusBadRequest)
		return
	}
	f, lagging := p.take(calls, isBatch)
	switch {
	case f.Drop > 0:
		p.count(RefusedDropped, 1)
		hangUp(w)
		return
	case f.Throttle > 0:
		p.count(RefusedThrottle, 1)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds()))))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":429,"message":"Your app has exceeded its compute units per second capacity."}}`))
		return
	}
	var out any
	if isBatch {
		out = p.batch(r, f, lagging, calls)
	} else {
		out = p.answer(r, f, lagging, calls[0])
	}
	if f.DropAfter > 0 {
		p.count(RefusedDropped, 1)
		hangUp(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// take counts the request's calls and returns the faults it meets, using
// up one of the counted ones (Drop, Throttle, DropAfter, in that order).
func (p *Proxy) take(calls []call, isBatch bool) (Faults, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	for _, c := range calls {
		p.calls[c.Method]++
	}
	if isBatch {
		p.batches = append(p.batches, len(calls))
	}
	f := p.faults
	f.Refuse = maps.Clone(p.faults.Refuse) // the request reads its own copy
	switch {
	case p.faults.Drop > 0:
		p.faults.Drop--
	case p.faults.Throttle > 0:
		p.faults.Throttle--
		f.Drop = 0
	case p.faults.DropAfter > 0:
		p.faults.DropAfter--
		f.Drop, f.Throttle = 0, 0
	default:
		f.Drop, f.Throttle, f.DropAfter = 0, 0, 0
	}
	lagging := f.Lag > 0 && (f.LagEvery <= 1 || p.requests%f.LagEvery == 0)
	return f, lagging
}

// batch answers a batch under f's batch limit.
func (p *Proxy) batch(r *http.Request, f Faults, lagging bool, calls []call) any {
	if f.BatchLimit > 0 && len(calls) > f.BatchLimit {
		p.count(RefusedBatch, 1)
		switch f.BatchStyle {
		case BatchWhole:
			return reply{ID: json.RawMessage("null"), Error: &rpcError{Code: -32600, Message: "batch limit exceeded"}}
		case BatchTruncate:
			p.count(RefusedTruncated, len(calls)-f.BatchLimit)
			calls = calls[:f.BatchLimit]
		default:
			return []reply{{ID: calls[0].ID, Error: &rpcError{Code: -32600, Message: "batch too large"}}}
		}
	}
	out := make([]reply, len(calls))
	for i, c := range calls {
		out[i] = p.answer(r, f, lagging, c)
	}
	return out
}

// reply is one JSON-RPC response object.
type reply struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func (r reply) MarshalJSON() ([]byte, error) {
	type plain reply
	r.Version = "2.0"
	if r.Error == nil && r.Result == nil {
		r.Result = json.RawMessage("null")
	}
	return json.Marshal(plain(r))
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "rpcproxy: cannot drop this connection", http.StatusInternalServerError)
		return
	}
	if conn, _, err := hj.Hijack(); err == nil {
		_ = conn.Close()
	}
}
