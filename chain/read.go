package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

func (s *Service) addRead(t ReadTrigger) error {
	n, err := s.network(t.Network, "read trigger "+t.Workflow)
	if err != nil {
		return err
	}
	if (t.EveryBlocks == 0) == (t.Interval <= 0) {
		return fmt.Errorf("read trigger %s: set exactly one of every-N-blocks and interval", t.Workflow)
	}
	if _, err := t.calldata(); err != nil {
		return fmt.Errorf("read trigger %s: arguments of %s: %w", t.Workflow, t.Method.Name, err)
	}
	name := TaskName("read", t.Workflow)
	if t.Interval > 0 {
		s.addTask(name, func(ctx context.Context, lease store.Lease) error {
			return s.readEvery(ctx, n, t, name, lease)
		})
		return nil
	}
	s.addTask(name, func(ctx context.Context, lease store.Lease) error {
		start, err := s.startAtHead(ctx, n, t.Confirmations)
		if err != nil {
			return err
		}
		fetch := func(ctx context.Context, from, to int64) (batch, error) {
			nums := everyN(from, to, t.EveryBlocks)
			hashes, err := s.blockHashes(ctx, n, nums)
			if err != nil {
				return batch{}, err
			}
			b := batch{hashes: hashes}
			for _, num := range nums {
				c, ok, err := s.readClaim(ctx, n, t, num, hashes[num], strconv.FormatInt(num, 10), "")
				if err != nil {
					return batch{}, err
				}
				if ok {
					b.claims = append(b.claims, c)
				}
			}
			return b, nil
		}
		return s.follow(ctx, n, &cursorJob{s: s, n: n, lease: lease, task: name, workflow: t.Workflow, phase: "block",
			depth: t.Confirmations, start: start, fetch: fetch})
	})
	return nil
}

// calldata is the view call's input: Calldata when given, else Method
// packed with Args.
func (t ReadTrigger) calldata() ([]byte, error) {
	if t.Calldata != nil {
		return t.Calldata, nil
	}
	input, err := t.Method.Inputs.Pack(t.Args...)
	if err != nil {
		return nil, err
	}
	return append(append([]byte{}, t.Method.ID...), input...), nil
}

// readClaim calls the view at block num and builds its claim if When
// accepts the result.
func (s *Service) readClaim(ctx context.Context, n *netState, t ReadTrigger, num int64, hash, key, tick string) (store.Claim, bool, error) {
	data, err := t.calldata()
	if err != nil {
		return store.Claim{}, false, err
	}
	block := uint64(num)
	out, err := n.client.CallContract(ctx, t.Address, data, &block)
	if err != nil {
		return store.Claim{}, false, fmt.Errorf("read %s at block %d: %w", t.Method.Name, num, err)
	}
	vals, err := t.Method.Outputs.Unpack(out)
	if err != nil {
		return store.Claim{}, false, fmt.Errorf("decode %s result at block %d: %w", t.Method.Name, num, err)
	}
	var result any
	if len(vals) == 1 {
		result = Normalize(vals[0])
	} else {
		m := make(map[string]any, len(vals))
		for i, name := range trigger.ResultNames(t.Method.Outputs) {
			m[name] = Normalize(vals[i])
		}
		result = m
	}
	var failed string
	if t.When != nil {
		ok, err := t.When(result)
		if err != nil {
			// Claimed all the same, as a run that fails at once (see trigger_error.go).
			failed = "trigger when: " + err.Error()
			s.log.Warn("when condition failed; its run fails at once", "workflow", t.Workflow, "block", num, "err", err)
		} else if !ok {
			return store.Claim{}, false, nil
		}
	}
	payload, err := json.Marshal(trigger.ReadPayload{Result: result, Block: block, BlockHash: hash, Tick: tick})
	if err != nil {
		return store.Claim{}, false, err
	}
	return store.Claim{Workflow: t.Workflow, TriggerKey: key, TriggerKind: trigger.Read, Trigger: payload,
		ChainID: n.cfg.ChainID, BlockNumber: num, BlockHash: hash, TriggerError: failed}, true, nil
}

// readEvery polls the view once per Interval slot. The slot start (UTC,
// RFC 3339) is the claim key; the cursor holds the last slot done in Unix
// milliseconds. It belongs to the network so that a reorg serialises with
// the claim; the reorg's rewind only makes the current slot be read again
// (a no-op at the claim gate). Slots missed while no process held the lease
// are skipped, like cron without catch_up.
func (s *Service) readEvery(ctx context.Context, n *netState, t ReadTrigger, name string, lease store.Lease) error {
	const phase = "tick"
	for {
		slot := time.Now().UTC().Truncate(t.Interval)
		next := time.Until(slot.Add(t.Interval))
		err := s.readSlot(ctx, n, t, name, phase, lease, slot)
		switch {
		case errors.Is(err, errStale):
			next = n.cfg.BlockPollInterval // read the slot again, after the reorg
		case err != nil:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

func (s *Service) readSlot(ctx context.Context, n *netState, t ReadTrigger, name, phase string, lease store.Lease, slot time.Time) error {
	// The cursor is a slot, not a block: only its chain is checked.
	cursor, err := s.cursor(ctx, n, lease, t.Workflow, name, phase, -1, math.MaxInt64)
	if err != nil {
		return err
	}
	if slot.UnixMilli() <= cursor {
		return nil
	}
	reorgID, err := store.LastReorgID(ctx, s.pool, n.cfg.ChainID)
	if err != nil {
		return err
	}
	head, ok, err := store.WindowHead(ctx, s.pool, n.cfg.ChainID)
	if err != nil || !ok {
		return err
	}
	num := head.Number - int64(t.Confirmations)
	hashes, err := s.blockHashes(ctx, n, []int64{num})
	if err != nil {
		return err
	}
	tick := slot.Format(time.RFC3339)
	c, ok, err := s.readClaim(ctx, n, t, num, hashes[num], tick, tick)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := store.LockCursor(ctx, tx, name, phase)
		if err != nil {
			return err
		}
		if cur != cursor {
			return errStale
		}
		// As in cursorJob.step: a reorg since the read makes it stale.
		if rid, err := store.LastReorgID(ctx, tx, n.cfg.ChainID); err != nil {
			return err
		} else if rid != reorgID {
			return errStale
		}
		if err := s.fenceTx(ctx, tx, lease.Name); err != nil {
			return err
		}
		if ok {
			if _, err := s.claimer.ClaimTx(ctx, tx, []store.Claim{c}); err != nil {
				return fmt.Errorf("claim read %s: %w", tick, err)
			}
		}
		return store.AdvanceCursor(ctx, tx, lease, name, phase, cursor, slot.UnixMilli())
	})
}
