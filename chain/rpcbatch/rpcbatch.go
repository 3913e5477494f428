// Package rpcbatch sends JSON-RPC batches that shrink when the node
// refuses them. Nodes and hosted providers cap batches (geth's
// --rpc.batch-request-limit and --rpc.batch-response-max-size, most
// providers at 10 to 100 calls) and say so in several ways: an error for
// the whole request (one error object instead of an array, HTTP 413),
// geth's "batch too large" under the first call with no answer for the
// others, "response too large" for the calls past a size, or answers to
// only the first N calls. A Size learns the node's limit from the refusal,
// sends the refused calls again in smaller batches, down to single calls,
// and keeps the size that worked for every later batch to that node. The
// head tracker (chain) and the relayer's broadcasts and receipts both
// batch through it.
package rpcbatch

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/rpc"
)

// Caller sends JSON-RPC batches: *rpc.Client is one. A Caller that also
// has CallContext (singleCaller) makes a batch of one as a single call,
// which a node that takes no batches at all still answers.
type Caller interface {
	BatchCallContext(ctx context.Context, b []rpc.BatchElem) error
}

type singleCaller interface {
	CallContext(ctx context.Context, result any, method string, args ...any) error
}

// Size is the batch size one node accepts, as learned from its refusals.
// It is safe for concurrent use; share one per node.
type Size struct {
	mu   sync.Mutex
	size int // 0: no limit seen
}

// Learned is the largest batch the node has been seen to accept after a
// refusal (0: none refused yet).
func (s *Size) Learned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

func (s *Size) limit(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size > 0 {
		return min(n, s.size)
	}
	return n
}

// shrink lowers the size after a batch of n calls was refused with the
// first answered ones answered: a node answering a prefix says its limit,
// one that answers none says nothing, and the size halves.
func (s *Size) shrink(n, answered int) {
	next := max(1, n/2)
	if answered > 0 && answered < n {
		next = answered
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size == 0 || next < s.size {
		s.size = next
	}
}

// Call makes the calls of elems through c, in batches of at most the
// learned size, and sets each element's Result or Error as
// rpc.Client.BatchCallContext does. Refused calls are sent again in
// smaller batches; a batch of one is a single call, so a node that takes
// no batches at all is still answered. An error that is not a refusal (a
// transport failure, a rate limit) is returned at once; the elements then
// hold no answers to rely on, and sending them again is the caller's
// choice (calls in a batch must be safe to repeat).
func (s *Size) Call(ctx context.Context, c Caller, elems []rpc.BatchElem) error {
	pending := make([]int, len(elems))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		k := s.limit(len(pending))
		if one, ok := c.(singleCaller); ok && k == 1 {
			if err := single(ctx, one, &elems[pending[0]]); err != nil {
				return err
			}
			pending = pending[1:]
			continue
		}
		sub := make([]rpc.BatchElem, k)
		for i, at := range pending[:k] {
			sub[i] = elems[at]
			sub[i].Error = nil
		}
		if err := c.BatchCallContext(ctx, sub); err != nil {
			if !refusedWhole(err) || k == 1 {
				return err
			}
			s.shrink(k, 0)
			continue
		}
		var again []int
		answered := 0
		for i, at := range pending[:k] {
			if refusedCall(sub[i].Error) {
				again = append(again, at)
				continue
			}
			if len(again) == 0 {
				answered++
			}
			elems[at].Error = sub[i].Error
		}
		if len(again) > 0 {
			if k == 1 {
				elems[again[0]].Error = sub[0].Error // refused alone: the node's last word
				again = nil
			} else {
				s.shrink(k, answered)
			}
		}
		pending = append(again, pending[k:]...)
	}
	return nil
}

// single makes one element's call alone. The node's answer is the
// element's; anything else (no answer) is the call's error.
func single(ctx context.Context, c singleCaller, e *rpc.BatchElem) error {
	err := c.CallContext(ctx, e.Result, e.Method, e.Args...)
	var answer rpc.Error
	if err != nil && !errors.As(err, &answer) {
		return err
	}
	e.Error = err
	return nil
}

// refusedWhole reports whether a batch's error refuses the batch for its
// size: a reply that is one object where an array belongs (a provider's
// error for the whole request), HTTP 413 or 400, or a message naming the
// batch. Transport failures, rate limits and server errors are not.
func refusedWhole(err error) bool {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return true
	}
	var herr rpc.HTTPError
	if errors.As(err, &herr) {
		switch herr.StatusCode {
		case http.StatusRequestEntityTooLarge, http.StatusBadRequest:
			return true
		case http.StatusTooManyRequests:
			return false
		}
	}
	return batchWords(err.Error())
}

// refusedCall reports whether a call's error in a batch is the node
// refusing the batch rather than answering the call: no answer in the
// reply, or geth's "batch too large" / "response too large".
func refusedCall(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, rpc.ErrMissingBatchResponse) {
		return true
	}
	return batchWords(err.Error()) || strings.Contains(strings.ToLower(err.Error()), "response too large")
}

func batchWords(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{"batch too large", "batch limit", "batch size", "batch request limit",
		"too many requests in batch", "batch is too large", "exceeds the batch", "batch requests"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
