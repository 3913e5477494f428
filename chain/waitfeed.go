package chain

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// WaitFeed is a wait-only subscription: one (network, contract, event)
// that wait_for steps await. It is a task like a trigger's, with its own
// lease and persisted cursor walking the head (so it also catches what was
// emitted while rflow was down), but its logs go only to the WaitMatcher:
// it never creates a run.
type WaitFeed struct {
	Network string
	// Address filters by emitting contract (zero: any).
	Address common.Address
	Event   *Event
}

// WaitDelivery is what a wait feed hands the matcher in the transaction
// that advances its cursor: the logs of the new blocks, and for the waits
// parked since the last delivery the logs between their from block and the
// cursor (their lookback), so an event that landed before a wait was
// persisted still matches it.
type WaitDelivery struct {
	Feed store.WaitFeed
	// Head is the window head the range was read under; a candidate is
	// deep enough once Head - block >= its confirmations.
	Head int64
	Logs []Decoded
	// Lookback holds the logs from the lookback waits' earliest from block
	// up to the cursor; they apply only to the waits in LookbackIDs. A log
	// matches a wait only at or after the wait's from block.
	Lookback    []Decoded
	LookbackIDs []store.Lookback
}

// WaitMatcher matches a wait feed's deliveries against the parked waits.
// MatchTx runs inside the feed's cursor transaction: an error rolls the
// range back and it is read again, so it must be idempotent.
type WaitMatcher interface {
	MatchTx(ctx context.Context, tx pgx.Tx, d WaitDelivery) error
}

// Key is the feed's identity in the waits table.
func (f WaitFeed) key(chainID int64) store.WaitFeed {
	k := store.WaitFeed{ChainID: chainID, Topic: f.Event.Topic().Hex()}
	if f.Address != (common.Address{}) {
		k.Address = strings.ToLower(f.Address.Hex())
	}
	return k
}

// WaitTaskName is the lease and cursor name of a wait feed of the home
// project (Config.waitTask is any project's).
func WaitTaskName(k store.WaitFeed) string {
	addr := k.Address
	if addr == "" {
		addr = "any"
	}
	return "wait/" + strconv.FormatInt(k.ChainID, 10) + "/" + addr + "/" + k.Topic
}

// waitTask is the lease and cursor name of a wait feed of the project.
func (c Config) waitTask(k store.WaitFeed) string { return c.Namespace.Qualify(WaitTaskName(k)) }

func (s *Service) addWaitFeed(f WaitFeed) error {
	n, err := s.network(f.Network, "wait_for feed")
	if err != nil {
		return err
	}
	if f.Event == nil {
		return fmt.Errorf("wait_for feed on %s: no event", f.Network)
	}
	if s.cfg.Matcher == nil {
		return fmt.Errorf("wait_for feed on %s: no wait matcher configured", f.Network)
	}
	key := f.key(n.cfg.ChainID)
	name := s.cfg.waitTask(key)
	s.addTask(name, func(ctx context.Context, lease store.Lease) error {
		// A new feed starts at the head: waits parked before it existed
		// are covered by their lookback.
		start, err := s.startAtHead(ctx, n, 0)
		if err != nil {
			return err
		}
		j := &cursorJob{s: s, n: n, lease: lease, task: name, phase: "head", start: start,
			fetch: s.waitFetcher(n, f, key)}
		// delivered is the tag blocks the last delivery settled under.
		var delivered string
		j.deliver = func(ctx context.Context, tx pgx.Tx, b batch, head int64) error {
			mark, err := tagMark(ctx, tx, n.cfg.ChainID)
			if err != nil {
				return err
			}
			if err := s.cfg.Matcher.MatchTx(ctx, tx, WaitDelivery{Feed: key, Head: head, Logs: b.decoded,
				Lookback: b.lookback, LookbackIDs: b.lookbackIDs}); err != nil {
				return err
			}
			delivered = mark
			return nil
		}
		j.pending = func(ctx context.Context) (bool, error) {
			lbs, err := store.WaitLookbacks(ctx, s.pool, key, s.cfg.Namespace)
			if err != nil || len(lbs) > 0 {
				return len(lbs) > 0, err
			}
			mark, err := tagMark(ctx, s.pool, n.cfg.ChainID)
			return mark != delivered, err
		}
		return s.follow(ctx, n, j)
	})
	return nil
}

// waitFetcher reads a range's logs of the feed's event and, for waits
// parked since the last range, their lookback up to the range's start.
// Both are read in ranges of the network's sizer (a lookback can span far
// more blocks than the provider takes at once).
func (s *Service) waitFetcher(n *netState, f WaitFeed, key store.WaitFeed) fetchFunc {
	var addrs []common.Address
	if f.Address != (common.Address{}) {
		addrs = []common.Address{f.Address}
	}
	topics := [][]common.Hash{{f.Event.Topic()}}
	// One sizer for the feed's fetches. The cursor job may start one while
	// a range it dropped (stale) is still being read: mu takes them in turn.
	var mu sync.Mutex
	size := newRangeSizer(n, maxLogsPerRange)
	read := func(ctx context.Context, b *batch, from, to int64, into *[]Decoded) error {
		if to < from {
			return nil
		}
		q := LogQuery{From: uint64(from), To: uint64(to), Addresses: addrs, Topics: topics}
		return n.client.walkLogs(ctx, size, q, func(lo, hi uint64, logs []types.Log) error {
			var kept []types.Log
			var decoded []Decoded
			for _, l := range logs {
				if l.Removed {
					continue
				}
				b.hashes[int64(l.BlockNumber)] = l.BlockHash.Hex()
				d, err := f.Event.Decode(l)
				if err != nil {
					s.log.Warn("log of an awaited event cannot be decoded; no wait matches it", "event", f.Event.Name(),
						"tx", l.TxHash.Hex(), "log_index", l.Index, "err", err)
					continue
				}
				kept, decoded = append(kept, l), append(decoded, d)
			}
			// A match is a log as an event trigger's occurrence is: its
			// transaction and its position in it (txlogs.go).
			pos, err := n.client.TxLogIndexes(ctx, kept)
			if err != nil {
				return fmt.Errorf("logs %d..%d: %w", lo, hi, err)
			}
			for i := range decoded {
				decoded[i].TxLogIndex = pos[i]
			}
			*into = append(*into, decoded...)
			return nil
		})
	}
	return func(ctx context.Context, from, to int64) (batch, error) {
		mu.Lock()
		defer mu.Unlock()
		b := batch{hashes: map[int64]string{}}
		if err := read(ctx, &b, from, to, &b.decoded); err != nil {
			return batch{}, err
		}
		b.logs = len(b.decoded)
		lbs, err := store.WaitLookbacks(ctx, s.pool, key, s.cfg.Namespace)
		if err != nil {
			return batch{}, err
		}
		if len(lbs) > 0 {
			lo := from
			for _, lb := range lbs {
				lo = min(lo, max(lb.FromBlock, 0))
			}
			if lo < from {
				if err := read(ctx, &b, lo, from-1, &b.lookback); err != nil {
					return batch{}, err
				}
			}
			b.lookbackIDs = lbs
		}
		return b, nil
	}
}
