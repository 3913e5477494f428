package chain

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ReplayProgress is where a replay stands after a range: blocks read of
// the whole span (every phase counts the span once), logs read, and runs
// claimed so far.
type ReplayProgress struct {
	Blocks int64 `json:"blocks"`
	Total  int64 `json:"total_blocks"`
	Logs   int64 `json:"logs"`
	Runs   int64 `json:"runs"`
	// Ranges is how many eth_getLogs ranges were read; MaxRangeLogs the
	// most logs one of them held (what a replay holds in memory at once).
	Ranges       int64 `json:"ranges"`
	MaxRangeLogs int   `json:"max_range_logs"`
}

// ReplayOptions bound a replay's reads.
type ReplayOptions struct {
	// MaxLogs is the logs one range aims at (default: live ingestion's,
	// 5000).
	MaxLogs int
	// Progress, when set, is called after every claimed range.
	Progress func(ReplayProgress)
}

// Replay reads blocks from..to of the service's event triggers with the
// same adaptive eth_getLogs ranges as live ingestion (the next range is
// read while one is claimed), and passes each range's claims to the
// Claimer in a transaction of its own. It reads the span as history: no
// cursor, lease, head depth or block-hash window is involved, and a range
// is held in memory only until it is claimed, so a replay of any length
// uses the memory of two ranges at most. Only event triggers can be
// replayed; a service with other triggers is refused.
func (s *Service) Replay(ctx context.Context, from, to int64, opts ReplayOptions) (ReplayProgress, error) {
	p := ReplayProgress{}
	if from < 0 || to < from {
		return p, fmt.Errorf("replay: block range %d..%d: want 0 <= from <= to", from, to)
	}
	if len(s.cfg.Blocks) > 0 || len(s.cfg.Reads) > 0 || s.cfg.Reload != nil {
		return p, errors.New("replay: only event triggers read history; block and read triggers cannot be replayed")
	}
	if len(s.cfg.Events) == 0 {
		return p, errors.New("replay: no event trigger to replay")
	}
	maxLogs := opts.MaxLogs
	if maxLogs <= 0 {
		maxLogs = maxLogsPerRange
	}
	type pass struct {
		n     *netState
		fetch fetchFunc
	}
	var passes []pass
	for _, t := range s.cfg.Events {
		n, err := s.network(t.Network, "event trigger "+t.Workflow)
		if err != nil {
			return p, err
		}
		phases, err := t.phases()
		if err != nil {
			return p, err
		}
		for _, ph := range phases {
			passes = append(passes, pass{n: n, fetch: s.eventFetcher(n, t, ph, len(phases) > 1)})
		}
	}
	p.Total = (to - from + 1) * int64(len(passes))
	for _, ps := range passes {
		size := newRangeSizer(ps.n, maxLogs)
		// As live: the next range is read while this one is claimed, so
		// at most two ranges are in memory.
		read := func(from int64) <-chan fetchedRange {
			end := min(to, from+int64(size.next())-1)
			ch := make(chan fetchedRange, 1)
			go func() {
				b, err := ps.fetch(ctx, from, end)
				ch <- fetchedRange{from: from, to: end, b: b, err: err}
			}()
			return ch
		}
		for pending := read(from); pending != nil; {
			f := <-pending
			pending = nil
			if f.err != nil {
				if size.refused(f.err, f.from, f.to) == rangeRetry {
					pending = read(f.from)
					continue
				}
				return p, fmt.Errorf("replay blocks %d..%d: %w", f.from, f.to, f.err)
			}
			size.fit(f.b.logs)
			if f.to < to {
				pending = read(f.to + 1)
			}
			runs, err := s.claimRange(ctx, f)
			if err != nil {
				return p, err
			}
			p.Blocks += f.to - f.from + 1
			p.Logs += int64(f.b.logs)
			p.Runs += int64(runs)
			p.Ranges++
			p.MaxRangeLogs = max(p.MaxRangeLogs, f.b.logs)
			if opts.Progress != nil {
				opts.Progress(p)
			}
		}
	}
	return p, nil
}

// fetchedRange is one range a replay read.
type fetchedRange struct {
	from, to int64
	b        batch
	err      error
}

// claimRange passes a replayed range's claims to the Claimer in one
// transaction and returns how many runs they created.
func (s *Service) claimRange(ctx context.Context, f fetchedRange) (int, error) {
	if len(f.b.claims) == 0 {
		return 0, nil
	}
	var runs int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		runs = 0
		for i := 0; i < len(f.b.claims); i += s.cfg.ClaimBatch {
			chunk := f.b.claims[i:min(len(f.b.claims), i+s.cfg.ClaimBatch)]
			n, err := s.claimer.ClaimTx(ctx, tx, chunk)
			if err != nil {
				return fmt.Errorf("claim %d occurrence(s) in blocks %d..%d: %w", len(chunk), f.from, f.to, err)
			}
			runs += n
		}
		return nil
	})
	return runs, err
}
