package chain

import (
	"context"
	"errors"
	"sync"

	"github.com/ethereum/go-ethereum/core/types"
)

// rangeSizer sizes eth_getLogs ranges. It is the one sizer of every reader
// of chain history: event and block triggers, wait feeds and their
// lookback, subscriptions and replays. Ranges start at initialRange blocks
// (or the network's MaxBlockRange if smaller), aim at maxLogs logs each,
// so a dense stretch is read in small pieces and a sparse one in large
// ones, and shrink when the node refuses one: straight to what the refusal
// says works (a suggested range, a stated limit, a result cap; see
// rangeHint), or by half when it says nothing. What one range yields is
// therefore bounded (by maxLogs, or one block's logs), whatever the span.
//
// A stated limit is the provider's, not the reader's: it is remembered in
// the network's rangeLimits, so every other reader of that network (and
// every later one) starts below it instead of learning it again.
type rangeSizer struct {
	size    uint64
	max     uint64 // the network's MaxBlockRange
	maxLogs int
	limits  *rangeLimits
}

// rangeLimits is what a network's provider said about eth_getLogs: the
// most blocks and the most logs a range may have (0: nothing said). It is
// shared by the network's readers.
type rangeLimits struct {
	mu      sync.Mutex
	blocks  uint64
	results uint64
}

// lower records a stated limit; a limit only ever shrinks.
func (l *rangeLimits) lower(blocks, results uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if blocks > 0 && (l.blocks == 0 || blocks < l.blocks) {
		l.blocks = blocks
	}
	if results > 0 && (l.results == 0 || results < l.results) {
		l.results = results
	}
}

func (l *rangeLimits) get() (blocks, results uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blocks, l.results
}

// newRangeSizer sizes the ranges of a reader of n aiming at maxLogs logs.
func newRangeSizer(n *netState, maxLogs int) *rangeSizer {
	return &rangeSizer{max: n.cfg.MaxBlockRange, maxLogs: maxLogs, limits: &n.client.ranges}
}

// ceiling is the largest size allowed now, and the log target.
func (r *rangeSizer) ceiling() (uint64, int) {
	top, logs := r.max, r.maxLogs
	blocks, results := r.limits.get()
	if blocks > 0 {
		top = min(top, blocks)
	}
	if results > 0 {
		// Aim at half the cap: a range's logs vary around the target.
		logs = min(logs, max(1, int(results/2)))
	}
	return max(top, 1), logs
}

// next is the size of the next range.
func (r *rangeSizer) next() uint64 {
	top, _ := r.ceiling()
	if r.size == 0 {
		// Start at one block and double while ranges are sparse: a dense
		// start is then read in pieces, not one huge range.
		r.size = initialRange
	}
	r.size = min(r.size, top)
	return r.size
}

// rangeVerdict is what a reader does after an eth_getLogs error.
type rangeVerdict int

const (
	rangeFail   rangeVerdict = iota // the error is the node's last word: return it
	rangeRetry                      // the size shrank: read again, at once
	rangeLagged                     // the node is behind the range: read it again later
)

// refused adapts the size to the node's refusal (err) of from..to and says
// what the reader does next.
func (r *rangeSizer) refused(err error, from, to int64) rangeVerdict {
	if err == nil || errors.Is(err, context.Canceled) {
		return rangeFail
	}
	if lagging(err) {
		return rangeLagged
	}
	if !IsRangeError(err) {
		return rangeFail
	}
	span := uint64(max(to-from+1, 1))
	if span <= 1 {
		return rangeFail // one block refused: nothing smaller to ask
	}
	h := parseRangeHint(err.Error())
	r.limits.lower(h.limit, h.results)
	size := max(1, min(r.next(), span)/2)
	if s := min(h.suggested, h.limit); s > 0 && s < span {
		size = s
	} else if s = max(h.suggested, h.limit); s > 0 && s < span {
		size = s
	}
	r.size = size
	return rangeRetry
}

// fit adapts the size to the logs the last range held.
func (r *rangeSizer) fit(logs int) {
	r.next()
	top, target := r.ceiling()
	switch {
	case logs > target && r.size > 1:
		r.size = max(1, r.size/2)
	case logs < target/4 && r.size < top:
		r.size = min(top, r.size*2)
	}
}

// walkLogs reads q.From..q.To in ranges sized by r and hands each range
// and its logs to fn in block order. A refused range is read again smaller; a
// node behind the span, or one refusing a single block, ends the walk
// with its error.
func (c *Client) walkLogs(ctx context.Context, r *rangeSizer, q LogQuery, fn func(from, to uint64, logs []types.Log) error) error {
	for lo := q.From; lo <= q.To; {
		hi := min(q.To, lo+r.next()-1)
		part := q
		part.From, part.To = lo, hi
		logs, err := c.Logs(ctx, part)
		if err != nil {
			if r.refused(err, int64(lo), int64(hi)) == rangeRetry {
				continue
			}
			return err
		}
		r.fit(len(logs))
		if err := fn(lo, hi, logs); err != nil {
			return err
		}
		lo = hi + 1
	}
	return nil
}
