package rpcproxy

import (
	"fmt"
	"strconv"
	"time"
)

// Faults is what a Proxy does to the calls it relays. The zero value
// relays everything untouched. Change it while the proxy runs with
// Proxy.Set or Proxy.Update: the next request sees the new faults.
type Faults struct {
	// RangeLimit refuses eth_getLogs over more than RangeLimit blocks
	// (0: no limit), worded as RangeStyle's provider words it.
	RangeLimit uint64
	RangeStyle RangeStyle
	// ResultLimit refuses eth_getLogs whose answer holds more than
	// ResultLimit logs, as Infura does: "query returned more than 10000
	// results" (0: no limit).
	ResultLimit int

	// BatchLimit refuses JSON-RPC batches of more than BatchLimit calls
	// (0: no limit), the way BatchStyle says.
	BatchLimit int
	BatchStyle BatchStyle

	// Throttle answers the next Throttle requests with HTTP 429 Too Many
	// Requests and a Retry-After of RetryAfter (rounded up to seconds).
	Throttle   int
	RetryAfter time.Duration

	// Lag makes the proxy answer as a node Lag blocks behind the upstream
	// one: eth_blockNumber and the "latest" block are Lag blocks old,
	// newer blocks, receipts and transactions are unknown (null), and
	// eth_getLogs beyond its head is refused with geth's "block range
	// extends beyond current head block". LagEvery > 1 lags only every
	// LagEvery-th request, as a load balancer over a fresh node and a
	// lagging one answers (0 or 1: every request).
	Lag      uint64
	LagEvery int
	// LagHidesLogs makes the lagging node answer eth_getLogs past its
	// head with the logs it has, none of the newer blocks', instead of
	// refusing: what a node that has not indexed the newest blocks yet
	// answers behind some load balancers.
	LagHidesLogs bool

	// Refuse answers every call of the methods it names, alone or in a
	// batch, with its error message (code -32000): a node that cannot
	// serve them.
	Refuse map[string]string

	// Drop closes the connections of the next Drop requests without an
	// answer and without relaying them; DropAfter relays the next
	// DropAfter requests and then closes the connection unanswered (the
	// node did it, the caller cannot know).
	Drop, DropAfter int
}

// RangeStyle is a provider's wording of an eth_getLogs range refusal.
type RangeStyle int

const (
	// GethRange is geth's --rpc.rangelimit: code -32602, "exceed maximum
	// block range N", where N is the most blocks past the first one.
	GethRange RangeStyle = iota
	// AlchemyRange is Alchemy's: code -32602, "Log response size exceeded.
	// ... this block range should work: [0x.., 0x..]", suggesting the
	// range the limit allows from the requested start.
	AlchemyRange
	// QuickNodeRange is QuickNode's: code -32614, "eth_getLogs is limited
	// to a 10,000 range".
	QuickNodeRange
)

// BatchStyle is how a node refuses a batch over its limit.
type BatchStyle int

const (
	// BatchTooLarge is geth's --rpc.batch-request-limit: a one-element
	// reply, "batch too large" (code -32600) under the first call's id;
	// the other calls have no answer.
	BatchTooLarge BatchStyle = iota
	// BatchWhole answers the batch with one error object instead of an
	// array: "batch limit exceeded" (code -32600).
	BatchWhole
	// BatchTruncate answers the first BatchLimit calls and drops the rest
	// silently.
	BatchTruncate
)

// rangeError is the refusal of eth_getLogs from..to in style s.
func (s RangeStyle) rangeError(limit, from uint64) rpcError {
	switch s {
	case AlchemyRange:
		return rpcError{Code: -32602, Message: fmt.Sprintf("Log response size exceeded. You can make eth_getLogs "+
			"requests with up to a 2K block range and no limit on the response size, or you can request any block "+
			"range with a cap of 10K logs in the response. Based on your parameters, this block range should work: "+
			"[0x%x, 0x%x]", from, from+limit-1)}
	case QuickNodeRange:
		return rpcError{Code: -32614, Message: "eth_getLogs is limited to a " + thousands(limit) + " range"}
	default:
		return rpcError{Code: -32602, Message: fmt.Sprintf("exceed maximum block range %d", limit-1)}
	}
}

// thousands writes n with comma separators, as QuickNode words it.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
