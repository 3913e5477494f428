package chain

import (
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/rflow-dev/rflow/trigger"
)

// Nothing a trigger reads is dropped: a log the event's ABI cannot decode,
// or a where:/when: condition that fails on it, still claims its run, with
// store.Claim.TriggerError set; the engine fails that run at once (it is
// in the dead letter queue), and a retry evaluates it again under the
// workflow's current definition.

// UndecodablePayload is the trigger payload of a log that could not be
// decoded: the raw log, so a retry can decode it under a corrected ABI.
type UndecodablePayload struct {
	Log        types.Log `json:"log"`
	TxLogIndex uint      `json:"tx_log_index"`
	Block      uint64    `json:"block"`
	Phase      Phase     `json:"phase"`
}

// Redecode decodes an UndecodablePayload's log with ev and returns the
// payload a decodable log is claimed with.
func Redecode(ev *Event, payload []byte) (trigger.EventPayload, error) {
	var p UndecodablePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return trigger.EventPayload{}, fmt.Errorf("trigger payload: %w", err)
	}
	d, err := ev.Decode(p.Log)
	if err != nil {
		return trigger.EventPayload{}, decodeError(ev, err)
	}
	d.TxLogIndex = p.TxLogIndex
	return trigger.EventPayload{Event: d, Block: p.Block, Phase: string(p.Phase)}, nil
}

func decodeError(ev *Event, err error) error {
	return fmt.Errorf("trigger: the log cannot be decoded as event %s: %w", ev.ev.Sig, err)
}
