package chain

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// EventKey is an event claim's trigger key: chain_id:tx_hash:log_index, with
// the phase appended under run_on: both.
func EventKey(chainID int64, txHash common.Hash, logIndex uint, phase Phase, both bool) string {
	key := fmt.Sprintf("%d:%s:%d", chainID, txHash.Hex(), logIndex)
	if both {
		key += ":" + string(phase)
	}
	return key
}

func (s *Service) addEvent(t EventTrigger) error {
	n, err := s.network(t.Network, "event trigger "+t.Workflow)
	if err != nil {
		return err
	}
	if t.Event == nil {
		return fmt.Errorf("event trigger %s: no event", t.Workflow)
	}
	phases, err := t.phases()
	if err != nil {
		return err
	}
	name := TaskName("event", t.Workflow)
	s.addTask(name, func(ctx context.Context, lease store.Lease) error {
		jobs := make([]*cursorJob, 0, len(phases))
		for _, p := range phases {
			depth := 0
			if p == PhaseConfirmed {
				depth = confirmationsOf(t, n.cfg)
			}
			jobs = append(jobs, &cursorJob{s: s, n: n, lease: lease, task: name, workflow: t.Workflow, phase: string(p), depth: depth,
				tag: p.tag(), start: int64(t.StartBlock) - 1, fetch: s.eventFetcher(n, t, p, len(phases) > 1)})
		}
		return s.follow(ctx, n, jobs...)
	})
	return nil
}

// eventFetcher reads a range's logs, decodes them, applies Where and builds
// the claims.
func (s *Service) eventFetcher(n *netState, t EventTrigger, phase Phase, both bool) fetchFunc {
	return func(ctx context.Context, from, to int64) (batch, error) {
		logs, err := n.client.Logs(ctx, LogQuery{From: uint64(from), To: uint64(to), Addresses: t.Addresses,
			Topics: [][]common.Hash{{t.Event.Topic()}}})
		if err != nil {
			return batch{}, err
		}
		b := batch{hashes: make(map[int64]string), claims: make([]store.Claim, 0, len(logs)), logs: len(logs)}
		for _, l := range logs {
			if l.Removed {
				continue
			}
			b.hashes[int64(l.BlockNumber)] = l.BlockHash.Hex()
			c, ok, err := s.eventClaim(n, t, l, phase, both)
			if err != nil {
				return batch{}, err
			}
			if ok {
				b.claims = append(b.claims, c)
			}
		}
		return b, nil
	}
}

// eventClaim builds the claim of log l, or ok false when Where rejects it.
// A log that cannot be decoded, or on which Where fails, is claimed all the
// same with TriggerError set (see trigger_error.go).
func (s *Service) eventClaim(n *netState, t EventTrigger, l types.Log, phase Phase, both bool) (store.Claim, bool, error) {
	c := store.Claim{
		Workflow:    t.Workflow,
		TriggerKey:  EventKey(n.cfg.ChainID, l.TxHash, l.Index, phase, both),
		TriggerKind: trigger.Event,
		ChainID:     n.cfg.ChainID,
		BlockNumber: int64(l.BlockNumber),
		BlockHash:   l.BlockHash.Hex(),
	}
	d, err := t.Event.Decode(l)
	if err != nil {
		c.TriggerError = decodeError(t.Event, err).Error()
		s.log.Warn("log cannot be decoded; its run fails at once", "workflow", t.Workflow, "tx", l.TxHash.Hex(),
			"log_index", l.Index, "err", err)
		c.Trigger, err = json.Marshal(UndecodablePayload{Log: l, Block: l.BlockNumber, Phase: phase})
		if err != nil {
			return store.Claim{}, false, fmt.Errorf("encode log %s:%d: %w", l.TxHash.Hex(), l.Index, err)
		}
		return c, true, nil
	}
	if t.Where != nil {
		ok, err := t.Where(d.Fields())
		if err != nil {
			c.TriggerError = "trigger where: " + err.Error()
			s.log.Warn("where condition failed; its run fails at once", "workflow", t.Workflow, "tx", l.TxHash.Hex(),
				"log_index", l.Index, "err", err)
		} else if !ok {
			return store.Claim{}, false, nil
		}
	}
	c.Trigger, err = trigger.EventPayload{Event: d, Block: l.BlockNumber, Phase: string(phase)}.MarshalJSON()
	if err != nil {
		return store.Claim{}, false, fmt.Errorf("encode log %s:%d: %w", l.TxHash.Hex(), l.Index, err)
	}
	return c, true, nil
}
