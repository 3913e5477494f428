// Package chain makes rflow see the chain: it tracks each network's head in a
// persisted block-hash window, detects reorgs and rewinds cursors, and turns
// contract logs, blocks and view reads into claims (store.Claim) exactly once
// per trigger occurrence. The rest of rflow sees chain concepts (a decoded
// log, a head, a reorg), never RPC details.
package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/rflow-dev/rflow/chain/rpcbatch"
	"github.com/rflow-dev/rflow/redact"
)

// ErrNotFound is returned when the node does not know the requested block.
var ErrNotFound = errors.New("not found")

// ClientOptions configure a Client.
type ClientOptions struct {
	// URLs are HTTP(S) JSON-RPC endpoints, tried in order; a failing one is
	// skipped until the others fail too (failover).
	URLs []string
	// WSURL optionally names a WebSocket endpoint for newHeads
	// notifications; heads are still read over HTTP, the notification only
	// wakes the poller early.
	WSURL string
	// Timeout bounds one attempt of one call (default 10s).
	Timeout time.Duration
	// Attempts bounds the attempts of one call across all URLs (default
	// 3 per URL).
	Attempts int
	// Backoff is the first pause after every URL failed once; it doubles up
	// to MaxBackoff (defaults 100ms and 2s).
	Backoff, MaxBackoff time.Duration
	Logger              *slog.Logger
}

// Client is a JSON-RPC client over several URLs with failover and retries
// with backoff. Errors the node itself returns (a JSON-RPC error object such
// as a revert or "range too large") are not retried: they are answers.
type Client struct {
	opts ClientOptions
	log  *slog.Logger
	// http carries every HTTP URL's calls (see keepAlive), through
	// throttle, which honours the nodes' Retry-After.
	http     *http.Client
	throttle *retryAfter

	mu sync.Mutex
	// conns are by URL; nil is a WebSocket URL not connected yet (it did
	// not answer), dialled again when a call comes to it.
	conns     []*rpc.Client
	preferred int
	closed    bool

	// ranges is what the node said about eth_getLogs ranges (see
	// rangeSizer), shared by every reader of the network; batches is the
	// batch size it accepts, shared by every batch sent to it.
	ranges  rangeLimits
	batches rpcbatch.Size

	// noBlockReceipts is set once the node answered that it does not
	// serve eth_getBlockReceipts (txlogs.go).
	noBlockReceipts atomic.Bool
}

// Dial prepares a Client. HTTP endpoints are not contacted until the first
// call, so Dial succeeds while a node is down. A WebSocket endpoint is
// connected at once; one that does not answer is logged and skipped, like
// a failing HTTP one: calls go to the next URL and come back to it (and
// dial it again) when the others fail.
func Dial(ctx context.Context, opts ClientOptions) (*Client, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("chain client: no RPC URL")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3 * len(opts.URLs)
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{opts: opts, log: opts.Logger, conns: make([]*rpc.Client, len(opts.URLs)), preferred: -1,
		throttle: &retryAfter{next: keepAlive(), until: map[string]time.Time{}}}
	c.http = &http.Client{Transport: c.throttle}
	for i, u := range opts.URLs {
		dctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		rc, err := rpc.DialOptions(dctx, u, rpc.WithHTTPClient(c.http))
		cancel()
		switch {
		case err == nil:
			c.conns[i] = rc
			if c.preferred < 0 {
				c.preferred = i
			}
		case webSocket(u) && ctx.Err() == nil:
			c.log.Warn("RPC URL does not answer; calls fail over to the next URL and try it again later",
				"url", redact.URL(u), "err", redact.Error(err))
		default:
			c.Close()
			return nil, fmt.Errorf("chain client: dial %s: %w", redact.URL(u), redact.Error(err))
		}
	}
	c.preferred = max(c.preferred, 0)
	return c, nil
}

// idleConnsPerHost is how many idle connections to one node a Client keeps.
// Calls run concurrently (the relayer's workers, ingestion, reads); with
// net/http's default of 2, every call beyond the second concurrent one opened
// a new connection (a TLS handshake on https) and closed it after.
const idleConnsPerHost = 64

// keepAlive is the transport of a Client's HTTP calls: net/http's default
// (proxy from the environment, timeouts) keeping idleConnsPerHost idle
// connections per node.
func keepAlive() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = idleConnsPerHost
	t.MaxIdleConns = max(t.MaxIdleConns, idleConnsPerHost)
	return t
}

// webSocket reports whether u is a ws:// or wss:// URL (connected at dial
// time, unlike HTTP).
func webSocket(u string) bool {
	scheme, _, _ := strings.Cut(strings.ToLower(u), "://")
	return scheme == "ws" || scheme == "wss"
}

// conn returns the connection to URL i, dialling it if it is not connected
// yet.
func (c *Client) conn(ctx context.Context, i int) (*rpc.Client, error) {
	c.mu.Lock()
	rc, closed := c.conns[i], c.closed
	c.mu.Unlock()
	if rc != nil || closed {
		if closed {
			return nil, errors.New("chain client closed")
		}
		return rc, nil
	}
	rc, err := rpc.DialOptions(ctx, c.opts.URLs[i], rpc.WithHTTPClient(c.http))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		rc.Close()
		return nil, errors.New("chain client closed")
	case c.conns[i] != nil:
		rc.Close() // another call connected it first
		return c.conns[i], nil
	}
	c.conns[i] = rc
	c.log.Info("RPC URL answers again", "url", redact.URL(c.opts.URLs[i]))
	return rc, nil
}

// Close releases the connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, rc := range c.conns {
		if rc != nil {
			rc.Close()
		}
	}
	c.http.CloseIdleConnections()
}

// Call makes one JSON-RPC call with failover and retries.
func (c *Client) Call(ctx context.Context, result any, method string, args ...any) error {
	return c.do(ctx, false, method, func(ctx context.Context, rc *rpc.Client) error {
		return rc.CallContext(ctx, result, method, args...)
	})
}

// do runs fn against the preferred URL and moves to the next one on a
// transport failure, pausing with backoff after each full round.
// rangeSensitive returns range errors (see IsRangeError, which includes
// per-attempt timeouts) to the caller at once: eth_getLogs shrinks its range
// instead of retrying the same one elsewhere.
func (c *Client) do(ctx context.Context, rangeSensitive bool, what string, fn func(context.Context, *rpc.Client) error) error {
	backoff := c.opts.Backoff
	var lastErr error
	for attempt := 0; attempt < c.opts.Attempts; attempt++ {
		c.mu.Lock()
		i := c.preferred
		c.mu.Unlock()
		if err := c.waitRetryAfter(ctx, i); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		rc, err := c.conn(actx, i)
		if err == nil {
			err = fn(actx, rc)
		}
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if answered(err) || (rangeSensitive && IsRangeError(err)) {
			return fmt.Errorf("%s: %w", what, err)
		}
		lastErr = fmt.Errorf("%s via %s: %w", what, redact.URL(c.opts.URLs[i]), redact.Error(err))
		c.log.Debug("rpc call failed", "call", what, "url", redact.URL(c.opts.URLs[i]), "err", redact.Error(err))
		c.mu.Lock()
		if c.preferred == i {
			c.preferred = (i + 1) % len(c.conns)
		}
		c.mu.Unlock()
		if (attempt+1)%len(c.conns) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, c.opts.MaxBackoff)
		}
	}
	return lastErr
}

// answered reports whether err is the node's own JSON-RPC answer (not worth
// retrying elsewhere), as opposed to a transport or availability failure.
func answered(err error) bool {
	if errors.Is(err, ethereum.NotFound) {
		return true // ethclient's reading of a null result: no such block or receipt
	}
	var rerr rpc.Error
	if !errors.As(err, &rerr) {
		return false
	}
	// Rate limits and "internal error" style answers are availability problems.
	switch rerr.ErrorCode() {
	case -32005, 429, -32603:
		return false
	}
	return true
}

// Header is the part of a block header rflow uses.
type Header struct {
	Number     uint64
	Hash       common.Hash
	ParentHash common.Hash
	Time       uint64
}

type rpcHeader struct {
	Number     hexutil.Uint64 `json:"number"`
	Hash       common.Hash    `json:"hash"`
	ParentHash common.Hash    `json:"parentHash"`
	Time       hexutil.Uint64 `json:"timestamp"`
}

// ChainID returns the node's chain id.
func (c *Client) ChainID(ctx context.Context) (int64, error) {
	var id hexutil.Big
	if err := c.Call(ctx, &id, "eth_chainId"); err != nil {
		return 0, err
	}
	return id.ToInt().Int64(), nil
}

// Head returns the latest block's header.
func (c *Client) Head(ctx context.Context) (Header, error) {
	return c.header(ctx, "latest")
}

// HeaderByNumber returns block n's header, or ErrNotFound.
func (c *Client) HeaderByNumber(ctx context.Context, n uint64) (Header, error) {
	return c.header(ctx, hexutil.EncodeUint64(n))
}

func (c *Client) header(ctx context.Context, tag string) (Header, error) {
	var raw json.RawMessage
	if err := c.Call(ctx, &raw, "eth_getBlockByNumber", tag, false); err != nil {
		return Header{}, err
	}
	if len(raw) == 0 || string(raw) == "null" {
		return Header{}, fmt.Errorf("block %s: %w", tag, ErrNotFound)
	}
	var h rpcHeader
	if err := json.Unmarshal(raw, &h); err != nil {
		return Header{}, fmt.Errorf("block %s: %w", tag, err)
	}
	return Header{Number: uint64(h.Number), Hash: h.Hash, ParentHash: h.ParentHash, Time: uint64(h.Time)}, nil
}

// Headers returns the headers of blocks from..to in JSON-RPC batches (as
// few as the node takes; see rpcbatch). A block the node does not have ends
// the list early (no error).
func (c *Client) Headers(ctx context.Context, from, to uint64) ([]Header, error) {
	if to < from {
		return nil, nil
	}
	n := int(to - from + 1)
	raws := make([]json.RawMessage, n)
	batch := make([]rpc.BatchElem, n)
	err := c.do(ctx, false, "eth_getBlockByNumber batch", func(ctx context.Context, rc *rpc.Client) error {
		for i := range batch {
			raws[i] = nil
			batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber",
				Args: []any{hexutil.EncodeUint64(from + uint64(i)), false}, Result: &raws[i]}
		}
		if err := c.batches.Call(ctx, rc, batch); err != nil {
			return err
		}
		for _, b := range batch {
			if b.Error != nil {
				return b.Error
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("headers %d..%d: %w", from, to, err)
	}
	out := make([]Header, 0, n)
	for i, raw := range raws {
		if len(raw) == 0 || string(raw) == "null" {
			break
		}
		var h rpcHeader
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("header %d: %w", from+uint64(i), err)
		}
		out = append(out, Header{Number: uint64(h.Number), Hash: h.Hash, ParentHash: h.ParentHash, Time: uint64(h.Time)})
	}
	return out, nil
}

// LogQuery selects logs in the block range From..To (inclusive).
type LogQuery struct {
	From, To  uint64
	Addresses []common.Address
	Topics    [][]common.Hash
}

// Logs calls eth_getLogs. Range errors, including a per-attempt timeout, are
// returned at once without failover, so the caller can shrink the range (see
// IsRangeError).
//
// The range's last block is asked for in the same request: a node that
// does not have it yet (one behind its peers behind a load balancer) may
// answer without the newest logs rather than refuse, and its answer would
// pass for a range without logs. Then the call is made again (failover
// and backoff) and, if no answer has the block, fails with errNodeBehind.
func (c *Client) Logs(ctx context.Context, q LogQuery) ([]types.Log, error) {
	arg := map[string]any{
		"fromBlock": hexutil.EncodeUint64(q.From),
		"toBlock":   hexutil.EncodeUint64(q.To),
	}
	if len(q.Addresses) > 0 {
		arg["address"] = q.Addresses
	}
	if len(q.Topics) > 0 {
		arg["topics"] = q.Topics
	}
	var logs []types.Log
	var last json.RawMessage
	err := c.do(ctx, true, "eth_getLogs", func(ctx context.Context, rc *rpc.Client) error {
		logs, last = nil, nil
		elems := []rpc.BatchElem{{Method: "eth_getLogs", Args: []any{arg}, Result: &logs},
			{Method: "eth_getBlockByNumber", Args: []any{hexutil.EncodeUint64(q.To), false}, Result: &last}}
		if err := c.batches.Call(ctx, rc, elems); err != nil {
			return err
		}
		if elems[0].Error != nil {
			return elems[0].Error
		}
		if elems[1].Error == nil && (len(last) == 0 || string(last) == "null") {
			return fmt.Errorf("block %d: %w", q.To, errNodeBehind)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("logs %d..%d: %w", q.From, q.To, err)
	}
	return logs, nil
}

// IsRangeError reports whether an eth_getLogs error means "ask for fewer
// blocks": too many results, range too large, response too big, timeout.
// A node behind the range ("block range extends beyond current head
// block") is not one: it will have the blocks soon.
func IsRangeError(err error) bool {
	if err == nil || lagging(err) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"too many", "range", "limit", "exceed", "too large", "timeout", "timed out",
		"deadline", "response size", "query returned more than"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// CallContract runs eth_call of data against to at block (nil: latest).
func (c *Client) CallContract(ctx context.Context, to common.Address, data []byte, block *uint64) ([]byte, error) {
	tag := "latest"
	if block != nil {
		tag = hexutil.EncodeUint64(*block)
	}
	var out hexutil.Bytes
	if err := c.Call(ctx, &out, "eth_call", map[string]any{"to": to, "data": hexutil.Bytes(data)}, tag); err != nil {
		return nil, err
	}
	return out, nil
}

// SubscribeHeads subscribes to newHeads over WSURL and sends the new head's
// number on the returned channel (dropping notifications the reader is too
// slow for). It reconnects with backoff until ctx ends. Without WSURL it
// returns nil: callers poll.
func (c *Client) SubscribeHeads(ctx context.Context) <-chan uint64 {
	if c.opts.WSURL == "" {
		return nil
	}
	out := make(chan uint64, 1)
	go func() {
		backoff := c.opts.Backoff
		for ctx.Err() == nil {
			err := c.followHeads(ctx, out)
			if ctx.Err() != nil {
				return
			}
			c.log.Warn("newHeads subscription ended; reconnecting", "url", redact.URL(c.opts.WSURL), "err", redact.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, c.opts.MaxBackoff)
		}
	}()
	return out
}

func (c *Client) followHeads(ctx context.Context, out chan<- uint64) error {
	rc, err := rpc.DialContext(ctx, c.opts.WSURL)
	if err != nil {
		return err
	}
	defer rc.Close()
	heads := make(chan rpcHeader, 16)
	sub, err := rc.EthSubscribe(ctx, heads, "newHeads")
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-sub.Err():
			return err
		case h := <-heads:
			select {
			case out <- uint64(h.Number):
			default:
			}
		}
	}
}
