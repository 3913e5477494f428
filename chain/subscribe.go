package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/rflow-dev/rflow/store"
)

// Subscription is a wait-only log subscription: matching logs are handed to
// Deliver once they are Depth blocks deep; it never creates runs.
type Subscription struct {
	ChainID int64
	// Address filters by emitting contract (zero: any).
	Address common.Address
	Event   *Event
	// Depth is the number of blocks on top of a log's block before it is
	// delivered (0: at the head).
	Depth int
	// Deliver gets each log in chain order. It must be idempotent: after a
	// reorg the subscription rewinds and delivers the new chain's logs, and a
	// Deliver error makes the whole range be delivered again.
	Deliver func(ctx context.Context, log Decoded) error
}

// Subscribe follows sub in the background until ctx ends, starting at the
// network's current head (logs already at Depth are not delivered; logs in
// the newest Depth blocks are, once deep enough). Its position lives in
// memory only. The network's window must be maintained by some process's
// Service.Run (any process: it is read from Postgres).
func (s *Service) Subscribe(ctx context.Context, sub Subscription) error {
	var n *netState
	for _, x := range s.nets {
		if x.cfg.ChainID == sub.ChainID {
			n = x
		}
	}
	if n == nil {
		return fmt.Errorf("subscribe: no network with chain id %d", sub.ChainID)
	}
	if sub.Event == nil || sub.Deliver == nil {
		return fmt.Errorf("subscribe: event and Deliver are required")
	}
	go func() {
		backoff := 200 * time.Millisecond
		f := &follower{s: s, n: n, sub: sub, cursor: -1, size: newRangeSizer(n, maxLogsPerRange)}
		for ctx.Err() == nil {
			err := f.run(ctx)
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("subscription failed; retrying", "chain_id", sub.ChainID, "event", sub.Event.Name(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
	return nil
}

type follower struct {
	s       *Service
	n       *netState
	sub     Subscription
	started bool
	cursor  int64
	reorgID int64
	size    *rangeSizer
}

func (f *follower) run(ctx context.Context) error {
	if !f.started {
		rid, err := store.LastReorgID(ctx, f.s.pool, f.sub.ChainID)
		if err != nil {
			return err
		}
		start, err := f.s.startAtHead(ctx, f.n, f.sub.Depth)
		if err != nil {
			return err
		}
		f.cursor, f.reorgID, f.started = start, rid, true
	}
	for {
		changed := f.n.wait()
		progressed, err := f.step(ctx)
		if err != nil {
			return err
		}
		if progressed {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(f.n.cfg.BlockPollInterval):
		}
	}
}

func (f *follower) step(ctx context.Context) (bool, error) {
	chainID := f.sub.ChainID
	fork, last, found, err := store.ReorgsSince(ctx, f.s.pool, chainID, f.reorgID)
	if err != nil {
		return false, err
	}
	if found {
		f.cursor = min(f.cursor, fork-1)
		f.reorgID = last
	}
	head, ok, err := store.WindowHead(ctx, f.s.pool, chainID)
	if err != nil || !ok {
		return false, err
	}
	target := head.Number - int64(f.sub.Depth)
	if f.cursor >= target {
		return false, nil
	}
	from, to := f.cursor+1, min(target, f.cursor+int64(f.size.next()))
	q := LogQuery{From: uint64(from), To: uint64(to), Topics: [][]common.Hash{{f.sub.Event.Topic()}}}
	if f.sub.Address != (common.Address{}) {
		q.Addresses = []common.Address{f.sub.Address}
	}
	logs, err := f.n.client.Logs(ctx, q)
	if err != nil {
		switch f.size.refused(err, from, to) {
		case rangeRetry:
			return true, nil
		case rangeLagged:
			return false, nil
		}
		return false, err
	}
	f.size.fit(len(logs))
	nums := make([]int64, 0, len(logs))
	for _, l := range logs {
		nums = append(nums, int64(l.BlockNumber))
	}
	window, err := store.BlockHashes(ctx, f.s.pool, chainID, nums)
	if err != nil {
		return false, err
	}
	bottom, err := store.WindowBottom(ctx, f.s.pool, chainID)
	if err != nil {
		return false, err
	}
	for _, l := range logs {
		if n := int64(l.BlockNumber); n >= bottom && window[n] != l.BlockHash.Hex() {
			return false, nil // the window has not caught up with the node yet
		}
	}
	pos, err := f.n.client.TxLogIndexes(ctx, logs)
	if errors.Is(err, errStale) {
		return false, nil // a reorg under way: read again
	}
	if err != nil {
		return false, err
	}
	for i, l := range logs {
		if l.Removed {
			continue
		}
		d, err := f.sub.Event.Decode(l)
		if err != nil {
			f.s.log.Warn("skipping undecodable log", "event", f.sub.Event.Name(), "err", err)
			continue
		}
		d.TxLogIndex = pos[i]
		if err := f.sub.Deliver(ctx, d); err != nil {
			return false, fmt.Errorf("deliver %s:%d: %w", l.TxHash.Hex(), l.Index, err)
		}
	}
	f.cursor = to
	return true, nil
}
