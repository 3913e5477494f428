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

// EventKey is an event claim's trigger key: the occurrence's identity,
// chain_id:tx_hash:tx<tx_log_index> (the log's position in its
// transaction, which a reorg that re-mines the transaction elsewhere does
// not change), with the phase appended under run_on: both. The "tx" marks
// it apart from the keys of earlier versions, whose last number was the
// block's log index (LegacyEventKey).
func EventKey(chainID int64, txHash common.Hash, txLogIndex uint, phase Phase, both bool) string {
	key := fmt.Sprintf("%d:%s:tx%d", chainID, txHash.Hex(), txLogIndex)
	if both {
		key += ":" + string(phase)
	}
	return key
}

// LegacyEventKey is the key earlier versions gave the log at block position
// logIndex: chain_id:tx_hash:log_index. The claim gate takes a run claimed
// under it, in the same block, as the same occurrence (store.Claim.LegacyKey).
func LegacyEventKey(chainID int64, txHash common.Hash, logIndex uint, phase Phase, both bool) string {
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

// eventFetcher reads a range's logs, decodes them, applies Where, finds
// the kept logs' positions in their transactions and builds the claims.
func (s *Service) eventFetcher(n *netState, t EventTrigger, phase Phase, both bool) fetchFunc {
	return func(ctx context.Context, from, to int64) (batch, error) {
		logs, err := n.client.Logs(ctx, LogQuery{From: uint64(from), To: uint64(to), Addresses: t.Addresses,
			Topics: [][]common.Hash{{t.Event.Topic()}}})
		if err != nil {
			return batch{}, err
		}
		b := batch{hashes: make(map[int64]string), logs: len(logs)}
		kept := make([]types.Log, 0, len(logs))
		occs := make([]occurrence, 0, len(logs))
		for _, l := range logs {
			if l.Removed {
				continue
			}
			b.hashes[int64(l.BlockNumber)] = l.BlockHash.Hex()
			o, ok := s.eventOccurrence(t, l)
			if ok {
				kept, occs = append(kept, l), append(occs, o)
			}
		}
		// Only the kept logs' transactions are looked up: a where: that
		// rejects most logs costs no receipts for them.
		pos, err := n.client.TxLogIndexes(ctx, kept)
		if err != nil {
			return batch{}, fmt.Errorf("logs %d..%d: %w", from, to, err)
		}
		b.claims = make([]store.Claim, len(kept))
		for i, l := range kept {
			if b.claims[i], err = occs[i].claim(n.cfg.ChainID, t, l, pos[i], phase, both); err != nil {
				return batch{}, err
			}
		}
		return b, nil
	}
}

// occurrence is a log that passed the trigger's Where (or whose decoding
// or Where failed: its run fails at once, see trigger_error.go).
type occurrence struct {
	d   Decoded
	err string // the claim's TriggerError
}

// eventOccurrence decodes l and applies Where; ok is false when Where
// rejects it. Where sees the event's fields but tx_log_index, which is
// looked up for the logs it keeps.
func (s *Service) eventOccurrence(t EventTrigger, l types.Log) (occurrence, bool) {
	d, err := t.Event.Decode(l)
	if err != nil {
		s.log.Warn("log cannot be decoded; its run fails at once", "workflow", t.Workflow, "tx", l.TxHash.Hex(),
			"log_index", l.Index, "err", err)
		return occurrence{err: decodeError(t.Event, err).Error()}, true
	}
	if t.Where != nil {
		f := d.Fields()
		delete(f, "tx_log_index")
		ok, err := t.Where(f)
		if err != nil {
			s.log.Warn("where condition failed; its run fails at once", "workflow", t.Workflow, "tx", l.TxHash.Hex(),
				"log_index", l.Index, "err", err)
			return occurrence{d: d, err: "trigger where: " + err.Error()}, true
		} else if !ok {
			return occurrence{}, false
		}
	}
	return occurrence{d: d}, true
}

// claim builds the claim of log l, txLogIndex its position in its
// transaction.
func (o occurrence) claim(chainID int64, t EventTrigger, l types.Log, txLogIndex uint, phase Phase, both bool) (store.Claim, error) {
	c := store.Claim{
		Workflow:     t.Workflow,
		TriggerKey:   EventKey(chainID, l.TxHash, txLogIndex, phase, both),
		LegacyKey:    LegacyEventKey(chainID, l.TxHash, l.Index, phase, both),
		TriggerKind:  trigger.Event,
		ChainID:      chainID,
		BlockNumber:  int64(l.BlockNumber),
		BlockHash:    l.BlockHash.Hex(),
		TriggerError: o.err,
	}
	var err error
	if o.err != "" && o.d.Event == "" { // undecodable: the raw log
		c.Trigger, err = json.Marshal(UndecodablePayload{Log: l, TxLogIndex: txLogIndex, Block: l.BlockNumber, Phase: phase})
	} else {
		o.d.TxLogIndex = txLogIndex
		c.Trigger, err = trigger.EventPayload{Event: o.d, Block: l.BlockNumber, Phase: string(phase)}.MarshalJSON()
	}
	if err != nil {
		return store.Claim{}, fmt.Errorf("encode log %s:%d: %w", l.TxHash.Hex(), l.Index, err)
	}
	return c, nil
}
