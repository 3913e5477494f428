package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// errStale means the window moved while a range was being read: the range
// is dropped and read again.
var errStale = errors.New("range is stale")

// batch is what a range fetch produced: claims, and the block hashes they
// rely on (block number -> hash) to be checked against the window inside the
// claim transaction.
type batch struct {
	claims []store.Claim
	hashes map[int64]string
	logs   int // logs read (before filtering), to size the next range

	// A wait feed's range (waitfeed.go): its decoded logs, and the
	// lookback of the waits parked since the last range.
	decoded     []Decoded
	lookback    []Decoded
	lookbackIDs []store.Lookback
}

// fetchFunc reads blocks from..to (inclusive) from the node. A range error
// (see IsRangeError) makes the caller shrink the range.
type fetchFunc func(ctx context.Context, from, to int64) (batch, error)

// cursorJob is one (task, phase) cursor walking a network's window at a
// depth. It is owned by one goroutine.
type cursorJob struct {
	s        *Service
	n        *netState
	lease    store.Lease
	task     string
	workflow string
	phase    string
	depth    int
	tag      store.FinalityTag // when set, the cursor follows the tag's block instead of a depth
	start    int64             // the cursor's first value if it does not exist yet
	fetch    fetchFunc
	// deliver, when set, replaces claiming: it gets the range's batch in
	// the transaction that advances the cursor (a wait feed's matcher).
	deliver func(ctx context.Context, tx pgx.Tx, b batch, head int64) error
	// pending, when set, reports work for a range with no new blocks.
	pending func(ctx context.Context) (bool, error)

	size *rangeSizer // current range size: shrinks on range errors, grows back
	next *fetched    // the following range, read while this one is claimed
}

// Range sizing: ranges start at initialRange blocks (or MaxBlockRange if
// smaller) and aim at maxLogsPerRange logs each.
const (
	initialRange    = 1
	maxLogsPerRange = 5000
)

// fetched is a range read in the background. reorgID is the chain's last
// reorg before the read; the claim transaction checks it is still the last.
type fetched struct {
	from, to int64
	reorgID  int64
	b        batch
	err      error
	done     chan struct{}
}

func (j *cursorJob) startFetch(ctx context.Context, from, to int64) *fetched {
	f := &fetched{from: from, to: to, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.reorgID, f.err = store.LastReorgID(ctx, j.s.pool, j.n.cfg.ChainID)
		if f.err == nil {
			f.b, f.err = j.fetch(ctx, from, to)
		}
	}()
	return f
}

// step advances the cursor by at most one range. It reports whether it made
// progress (so the caller loops at once) or is caught up (so it waits).
func (j *cursorJob) step(ctx context.Context) (bool, error) {
	chainID := j.n.cfg.ChainID
	head, ok, err := store.WindowHead(ctx, j.s.pool, chainID)
	if err != nil || !ok {
		return false, err
	}
	target, ok, err := j.target(ctx, head.Number)
	if err != nil || !ok {
		return false, err
	}
	cursor, err := j.s.cursor(ctx, j.n, j.lease, j.workflow, j.task, j.phase, j.start, head.Number)
	if err != nil {
		return false, err
	}
	empty := cursor >= target
	if empty {
		// Caught up. A wait feed still reads an empty range when waits
		// parked since its last range need their lookback: on an idle
		// chain nothing else would search their gap.
		if j.pending == nil {
			return false, nil
		}
		if ok, err := j.pending(ctx); err != nil || !ok {
			return false, err
		}
	}
	if j.size == nil {
		j.size = newRangeSizer(j.n, maxLogsPerRange)
	}
	from := cursor + 1
	f := j.next
	j.next = nil
	switch {
	case empty:
		f = j.startFetch(ctx, from, cursor) // no blocks: the cursor stays
	case f == nil || f.from != from || f.to > target:
		f = j.startFetch(ctx, from, min(target, from+int64(j.size.next())-1))
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return false, nil
	}
	if f.err != nil {
		if errors.Is(f.err, errStale) { // a receipt of another block (txlogs.go): a reorg is under way
			j.s.log.Debug("range stale; rereading", "task", j.task, "phase", j.phase, "from", f.from, "to", f.to, "err", f.err)
			return false, nil
		}
		switch j.size.refused(f.err, f.from, f.to) {
		case rangeRetry:
			j.s.log.Info("shrinking block range", "task", j.task, "phase", j.phase, "range", j.size.size, "err", f.err)
			return true, nil
		case rangeLagged:
			j.s.log.Debug("node behind the range; reading it again later", "task", j.task, "phase", j.phase,
				"from", f.from, "to", f.to, "err", f.err)
			return false, nil
		}
		return false, f.err
	}
	// Keep ranges around maxLogsPerRange logs, so claim transactions stay
	// moderate and the next range is read while this one is claimed.
	j.size.fit(f.b.logs)
	to, b, reorgID := f.to, f.b, f.reorgID
	if to < target {
		j.next = j.startFetch(ctx, to+1, min(target, to+int64(j.size.next())))
	}
	err = pgx.BeginFunc(ctx, j.s.pool, func(tx pgx.Tx) error {
		// Lock the cursor first: a reorg locks every cursor of the chain
		// before it rewinds them, so it either committed before this point
		// (and LastReorgID shows it) or waits and then sees this advance.
		cur, err := store.LockCursor(ctx, tx, j.task, j.phase)
		if err != nil {
			return err
		}
		if cur != cursor {
			return errStale
		}
		if rid, err := store.LastReorgID(ctx, tx, chainID); err != nil {
			return err
		} else if rid != reorgID {
			return errStale
		}
		if err := j.verify(ctx, tx, b.hashes); err != nil {
			return err
		}
		if err := j.s.fenceTx(ctx, tx, j.lease.Name); err != nil {
			return err
		}
		if j.deliver != nil {
			if err := j.deliver(ctx, tx, b, head.Number); err != nil {
				return fmt.Errorf("deliver blocks %d..%d: %w", from, to, err)
			}
		}
		for i := 0; i < len(b.claims); i += j.s.cfg.ClaimBatch {
			chunk := b.claims[i:min(len(b.claims), i+j.s.cfg.ClaimBatch)]
			if _, err := j.s.claimer.ClaimTx(ctx, tx, chunk); err != nil {
				return fmt.Errorf("claim %d occurrence(s) in blocks %d..%d: %w", len(chunk), from, to, err)
			}
		}
		return store.AdvanceCursor(ctx, tx, j.lease, j.task, j.phase, cursor, to)
	})
	switch {
	case errors.Is(err, errStale), errors.Is(err, store.ErrCursorMoved):
		j.s.log.Debug("range stale; rereading", "task", j.task, "phase", j.phase, "from", from, "to", to)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s/%s blocks %d..%d: %w", j.task, j.phase, from, to, err)
	}
	return !empty, nil
}

// cursor returns the (task, phase) cursor of workflow's trigger on n, and
// first resets it to start when it cannot be trusted on the chain n reads:
// it was written on another chain id (the network's chain_id changed, or
// the trigger moved to another network), or it lies beyond head, the
// newest block of the chain's window (the window was replaced under it)
// and beyond start.
// Either way, continuing from it would skip blocks of this chain.
func (s *Service) cursor(ctx context.Context, n *netState, lease store.Lease, workflow, task, phase string, start, head int64) (int64, error) {
	chainID := n.cfg.ChainID
	c, err := store.EnsureCursor(ctx, s.pool, task, phase, chainID, start)
	if err != nil {
		return 0, err
	}
	// A start block beyond the head is the user's choice: wait for it.
	if c.ChainID == chainID && c.Block <= max(head, start) {
		return c.Block, nil
	}
	if c.ChainID != chainID {
		s.log.Warn("cursor was written on another chain; restarting the trigger at its start block",
			"network", n.cfg.Name, "task", task, "phase", phase, "old_chain_id", c.ChainID, "chain_id", chainID,
			"cursor", c.Block, "start_block", start+1)
	} else {
		s.log.Warn("cursor is beyond the chain's head; restarting the trigger at its start block",
			"network", n.cfg.Name, "task", task, "phase", phase, "chain_id", chainID, "cursor", c.Block,
			"head", head, "start_block", start+1)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return store.ResetCursor(ctx, tx, lease, task, phase, workflow, c.ChainID, chainID, start)
	})
	if err != nil {
		return 0, fmt.Errorf("network %s: %w", n.cfg.Name, err)
	}
	return start, nil
}

// verify checks that every block the batch relies on is still the window's
// block at that height. Blocks older than the window are final enough to
// trust.
func (j *cursorJob) verify(ctx context.Context, tx pgx.Tx, hashes map[int64]string) error {
	if len(hashes) == 0 {
		return nil
	}
	bottom, err := store.WindowBottom(ctx, tx, j.n.cfg.ChainID)
	if err != nil {
		return err
	}
	nums := make([]int64, 0, len(hashes))
	for n := range hashes {
		if n >= bottom {
			nums = append(nums, n)
		}
	}
	window, err := store.BlockHashes(ctx, tx, j.n.cfg.ChainID, nums)
	if err != nil {
		return err
	}
	for _, n := range nums {
		if window[n] != hashes[n] {
			return errStale
		}
	}
	return nil
}

// follow runs jobs until ctx ends: each steps while it makes progress, and
// all wait for the next window change or poll interval when caught up.
func (s *Service) follow(ctx context.Context, n *netState, jobs ...*cursorJob) error {
	for {
		changed := n.wait()
		progressed := false
		for _, j := range jobs {
			ok, err := j.step(ctx)
			if err != nil {
				return err
			}
			progressed = progressed || ok
		}
		if ctx.Err() != nil {
			return nil
		}
		if progressed {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(n.cfg.BlockPollInterval):
		}
	}
}
