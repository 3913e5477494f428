package jobs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/workflow"
)

// EventMeta are the log coordinates an occurrence fired by hand may set
// besides the event's args. tx_log_index (the log's position in its
// transaction, 0 unless set) is the occurrence's identity with tx_hash
// (chain.EventKey).
var EventMeta = []string{"block", "tx_hash", "log_index", "tx_log_index", "address"}

// EventFieldError is a field of an event occurrence that does not fit the
// event: Field names it ("" when the problem is the whole occurrence).
type EventFieldError struct {
	Field string
	Msg   string
}

func (e *EventFieldError) Error() string { return e.Msg }

// EventOccurrence is the log that an occurrence of wf's event with fields
// would be (its args by name, typed per the ABI from JSON numbers or
// decimal strings, plus optionally the coordinates in EventMeta), decoded
// as ingestion decodes, so expressions see the types an ingested log gives.
// base is the log's coordinates when fields set none. `rflow run --event`
// and workflow tests both fire events through it. A mismatch is an
// *EventFieldError.
func EventOccurrence(p *workflow.Project, wf *workflow.Workflow, fields map[string]any, base types.Log) (chain.Decoded, types.Log, error) {
	t := wf.Trigger.Event
	c := p.Contract(t.Contract)
	if c == nil || c.ABI == nil || t.ABIEvent == nil {
		return chain.Decoded{}, types.Log{}, fmt.Errorf("workflow %s: contract %s has no ABI event %s", wf.Name, t.Contract, t.Event)
	}
	ev, err := chain.NewEvent(*c.ABI, t.Event)
	if err != nil {
		return chain.Decoded{}, types.Log{}, fmt.Errorf("workflow %s: %w", wf.Name, err)
	}
	bad := func(field, format string, args ...any) (chain.Decoded, types.Log, error) {
		return chain.Decoded{}, types.Log{}, &EventFieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	inputs := t.ABIEvent.Inputs
	var missing, unknown []string
	args := make([]any, len(inputs))
	for i, in := range inputs {
		v, ok := fields[in.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", in.Name, in.Type))
			continue
		}
		if args[i], err = workflow.ABIValue(numbersAsText(v), in.Type); err != nil {
			return bad(in.Name, "%s (%s): %v", in.Name, in.Type, err)
		}
	}
	for k := range fields {
		known := slices.Contains(EventMeta, k) || slices.ContainsFunc(inputs, func(a abi.Argument) bool { return a.Name == k })
		if !known {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	switch {
	case len(missing) > 0:
		return bad("", "missing %s of event %s", strings.Join(missing, ", "), t.Event)
	case len(unknown) > 0:
		return bad(unknown[0], "%s: not an argument of event %s (%s) nor one of %s",
			strings.Join(unknown, ", "), t.Event, EventArgsExample(t), strings.Join(EventMeta, ", "))
	}
	if base.Address == (common.Address{}) {
		base.Address = c.Address
	}
	if v, ok := fields["block"]; ok {
		b, err := workflow.ABIValue(numbersAsText(v), uint64Type)
		if err != nil {
			return bad("block", "block: %v", err)
		}
		base.BlockNumber = b.(uint64)
	}
	if v, ok := fields["log_index"]; ok {
		i, err := workflow.ABIValue(numbersAsText(v), uint64Type)
		if err != nil {
			return bad("log_index", "log_index: %v", err)
		}
		base.Index = uint(i.(uint64))
	}
	if v, ok := fields["tx_hash"]; ok {
		b, err := workflow.ABIValue(v, hashType)
		if err != nil {
			return bad("tx_hash", "tx_hash %v is not a 32-byte 0x hash", v)
		}
		base.TxHash = common.Hash(b.([32]byte))
	}
	if v, ok := fields["address"]; ok {
		s, isStr := v.(string)
		if !isStr || !common.IsHexAddress(s) {
			return bad("address", "address %v is not a 0x address", v)
		}
		base.Address = common.HexToAddress(s)
	}
	var txLogIndex uint
	if v, ok := fields["tx_log_index"]; ok {
		i, err := workflow.ABIValue(numbersAsText(v), uint64Type)
		if err != nil {
			return bad("tx_log_index", "tx_log_index: %v", err)
		}
		txLogIndex = uint(i.(uint64))
	}
	l, err := ev.EncodeLog(base, args)
	if err != nil {
		return bad("", "%v", err)
	}
	d, err := ev.Decode(l)
	if err != nil {
		return chain.Decoded{}, types.Log{}, fmt.Errorf("decode the synthetic log: %w", err)
	}
	d.TxLogIndex = txLogIndex
	return d, l, nil
}

// EventArgsExample lists an event's args as a JSON object's keys, for
// messages: "sender": …, "amount": ….
func EventArgsExample(t *workflow.EventTrigger) string {
	if t == nil || t.ABIEvent == nil {
		return ""
	}
	parts := make([]string, 0, len(t.ABIEvent.Inputs))
	for _, in := range t.ABIEvent.Inputs {
		parts = append(parts, fmt.Sprintf(`"%s": …`, in.Name))
	}
	return strings.Join(parts, ", ")
}

// The ABI types an occurrence's log coordinates are read as.
var (
	uint64Type = mustABIType("uint64")
	hashType   = mustABIType("bytes32")
)

func mustABIType(name string) abi.Type {
	t, err := abi.NewType(name, "", nil)
	if err != nil {
		panic(err) // the names above are valid ABI types
	}
	return t
}

// numbersAsText turns json.Numbers (anywhere in v) into their text, which
// workflow.ABIValue reads exactly, whatever their size.
func numbersAsText(v any) any {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = numbersAsText(it)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, it := range x {
			out[k] = numbersAsText(it)
		}
		return out
	}
	return v
}
