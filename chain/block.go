package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

func (s *Service) addBlock(t BlockTrigger) error {
	n, err := s.network(t.Network, "block trigger "+t.Workflow)
	if err != nil {
		return err
	}
	if t.Every == 0 {
		return fmt.Errorf("block trigger %s: every must be at least 1", t.Workflow)
	}
	var tag store.FinalityTag
	switch t.RunOn {
	case "", RunOnHead:
	case RunOnSafe, RunOnFinalized:
		tag = Phase(t.RunOn).tag()
	default:
		return fmt.Errorf("block trigger %s: run_on %q: want head, safe or finalized", t.Workflow, t.RunOn)
	}
	name := TaskName("block", t.Workflow)
	s.addTask(name, func(ctx context.Context, lease store.Lease) error {
		start, err := s.startAtHead(ctx, n, t.Confirmations)
		if err != nil {
			return err
		}
		fetch := func(ctx context.Context, from, to int64) (batch, error) {
			hashes, err := s.blockHashes(ctx, n, everyN(from, to, t.Every))
			if err != nil {
				return batch{}, err
			}
			b := batch{hashes: hashes}
			for _, num := range everyN(from, to, t.Every) {
				payload, err := json.Marshal(trigger.BlockPayload{Block: uint64(num), BlockHash: hashes[num]})
				if err != nil {
					return batch{}, err
				}
				b.claims = append(b.claims, store.Claim{Workflow: t.Workflow, TriggerKey: strconv.FormatInt(num, 10),
					TriggerKind: trigger.Block, Trigger: payload, ChainID: n.cfg.ChainID, BlockNumber: num, BlockHash: hashes[num]})
			}
			return b, nil
		}
		// A tagged block trigger's cursor is its own phase (named by the
		// tag), so lag and stall checks measure it against the tag.
		phase := "block"
		if tag != "" {
			phase = string(tag)
		}
		return s.follow(ctx, n, &cursorJob{s: s, n: n, lease: lease, task: name, workflow: t.Workflow, phase: phase,
			depth: t.Confirmations, tag: tag, start: start, fetch: fetch})
	})
	return nil
}

// everyN lists the block numbers in from..to divisible by every.
func everyN(from, to int64, every uint64) []int64 {
	e := int64(every)
	var out []int64
	for b := (from + e - 1) / e * e; b <= to; b += e {
		out = append(out, b)
	}
	return out
}

// startAtHead waits for the network's window and returns the block a new
// block/read cursor starts after: the current head at that depth (new
// triggers do not backfill).
func (s *Service) startAtHead(ctx context.Context, n *netState, depth int) (int64, error) {
	for {
		changed := n.wait()
		head, ok, err := store.WindowHead(ctx, s.pool, n.cfg.ChainID)
		if err != nil {
			return 0, err
		}
		if ok {
			return head.Number - int64(depth), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		}
	}
}

// blockHashes returns the hashes of blocks nums, from the window, or from
// the node for blocks older than it.
func (s *Service) blockHashes(ctx context.Context, n *netState, nums []int64) (map[int64]string, error) {
	hashes, err := store.BlockHashes(ctx, s.pool, n.cfg.ChainID, nums)
	if err != nil {
		return nil, err
	}
	for _, num := range nums {
		if _, ok := hashes[num]; ok {
			continue
		}
		h, err := n.client.HeaderByNumber(ctx, uint64(num))
		if err != nil {
			return nil, err
		}
		hashes[num] = h.Hash.Hex()
	}
	return hashes, nil
}
