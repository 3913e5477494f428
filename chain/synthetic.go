package chain

import (
	"fmt"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/core/types"
)

// EncodeLog returns the log that emitting e with args would produce, at
// base's coordinates (address, block, tx hash, log index). args are in the
// event's input order, as abi.Arguments.Pack takes them (see
// workflow.ABIValue); indexed ones become topics. A log fired by hand
// (`rflow run --event`) is decoded from it, so its fields are typed
// exactly as ingested ones are.
func (e *Event) EncodeLog(base types.Log, args []any) (types.Log, error) {
	if len(args) != len(e.ev.Inputs) {
		return types.Log{}, fmt.Errorf("event %s: %d argument(s) for %d input(s)", e.ev.Name, len(args), len(e.ev.Inputs))
	}
	var indexed [][]any // one alternative per topic, as MakeTopics takes a filter
	var plain []any
	for i, in := range e.ev.Inputs {
		if in.Indexed {
			indexed = append(indexed, []any{args[i]})
		} else {
			plain = append(plain, args[i])
		}
	}
	topics, err := abi.MakeTopics(indexed...)
	if err != nil {
		return types.Log{}, fmt.Errorf("event %s: indexed arguments: %w", e.ev.Name, err)
	}
	data, err := e.ev.Inputs.NonIndexed().Pack(plain...)
	if err != nil {
		return types.Log{}, fmt.Errorf("event %s: %w", e.ev.Name, err)
	}
	l := base
	l.Topics = append(l.Topics[:0:0], e.ev.ID)
	for _, t := range topics {
		l.Topics = append(l.Topics, t[0])
	}
	l.Data = data
	return l, nil
}
