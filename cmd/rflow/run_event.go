package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// projectWorkflow finds the workflow rflow run names in the project file,
// or says which ones there are: a name that is not in the file is a typo,
// not a deploy to wait for.
func projectWorkflow(p *workflow.Project, name, file string) (*workflow.Workflow, error) {
	if w := p.Workflow(name); w != nil {
		return w, nil
	}
	names := make([]string, 0, len(p.Workflows))
	for _, w := range p.Workflows {
		names = append(names, w.Name)
	}
	slices.Sort(names)
	list := strings.Join(names, ", ")
	if list == "" {
		list = "none"
	}
	return nil, cli.Exit(fmt.Sprintf("workflow %s is not in %s; workflows: %s", name, file, list), exitFailure)
}

// checkRunTrigger says how rflow run starts w: --input for a manual
// trigger, --event for an event trigger; anything else is a usage error.
func checkRunTrigger(w *workflow.Workflow, hasEvent, hasInput bool) error {
	kind := w.Trigger.Kind
	switch {
	case kind == trigger.Manual && hasEvent:
		return usagef("workflow %s has a manual trigger: pass --input JSON, not --event", w.Name)
	case kind == trigger.Event && hasInput:
		return usagef("workflow %s has an event trigger: pass the event as --event JSON, not --input", w.Name)
	case kind == trigger.Event && !hasEvent:
		return usagef("workflow %s has an event trigger: pass the occurrence to fire it with, e.g. --event '{%s}' (its args, and optionally block, tx_hash, log_index, address)",
			w.Name, exampleEventArgs(w.Trigger.Event))
	case kind != trigger.Manual && kind != trigger.Event:
		return usagef("workflow %s has a %s trigger: rflow run starts manual workflows (--input) and event workflows (--event)", w.Name, kind)
	}
	return nil
}

func exampleEventArgs(t *workflow.EventTrigger) string {
	if t == nil || t.ABIEvent == nil {
		return ""
	}
	parts := make([]string, 0, len(t.ABIEvent.Inputs))
	for _, in := range t.ABIEvent.Inputs {
		parts = append(parts, fmt.Sprintf(`"%s": …`, in.Name))
	}
	return strings.Join(parts, ", ")
}

// The ABI types --event's log coordinates are read as.
var (
	uint64Type = mustABIType("uint64")
	hashType   = mustABIType("bytes32")
)

func mustABIType(name string) abi.Type {
	t, err := abi.NewType(name, "", nil)
	if err != nil {
		panic(err)
	}
	return t
}

// eventMeta are the log coordinates --event may set besides the args.
var eventMeta = []string{"block", "tx_hash", "log_index", "address"}

// syntheticEventClaim builds the claim of an occurrence of w's event fired
// by hand: the args come from eventJSON and are typed per the ABI (integers
// exact from JSON numbers or decimal strings); the log is ABI-encoded and
// decoded as an ingested one would be, so expressions see the same types.
// The run's trigger is an event one marked "synthetic": true, keyed key,
// with no chain coordinates (a reorg never orphans it). The trigger's
// where: is not applied: the run is asked for by name.
func syntheticEventClaim(p *workflow.Project, w *workflow.Workflow, eventJSON, key string) (store.Claim, error) {
	t := w.Trigger.Event
	c := p.Contract(t.Contract)
	if c == nil || c.ABI == nil || t.ABIEvent == nil {
		return store.Claim{}, fmt.Errorf("workflow %s: contract %s has no ABI event %s", w.Name, t.Contract, t.Event)
	}
	ev, err := chain.NewEvent(*c.ABI, t.Event)
	if err != nil {
		return store.Claim{}, fmt.Errorf("workflow %s: %w", w.Name, err)
	}
	dec := json.NewDecoder(strings.NewReader(eventJSON))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil || dec.More() || fields == nil {
		if err == nil {
			err = fmt.Errorf("want one JSON object")
		}
		return store.Claim{}, usagef("--event is not a JSON object: %v", err)
	}
	inputs := t.ABIEvent.Inputs
	var missing, unknown []string
	known := map[string]bool{}
	for _, m := range eventMeta {
		known[m] = true
	}
	args := make([]any, len(inputs))
	for i, in := range inputs {
		known[in.Name] = true
		v, ok := fields[in.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", in.Name, in.Type))
			continue
		}
		if args[i], err = workflow.ABIValue(jsonNumbersAsText(v), in.Type); err != nil {
			return store.Claim{}, usagef("--event: %s (%s): %v", in.Name, in.Type, err)
		}
	}
	for k := range fields {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	switch {
	case len(missing) > 0:
		return store.Claim{}, usagef("--event: missing %s of event %s", strings.Join(missing, ", "), t.Event)
	case len(unknown) > 0:
		return store.Claim{}, usagef("--event: %s: not an argument of event %s (%s) nor one of %s",
			strings.Join(unknown, ", "), t.Event, exampleEventArgs(t), strings.Join(eventMeta, ", "))
	}

	base := types.Log{Address: c.Address}
	if v, ok := fields["block"]; ok {
		b, err := workflow.ABIValue(jsonNumbersAsText(v), uint64Type)
		if err != nil {
			return store.Claim{}, usagef("--event: block: %v", err)
		}
		base.BlockNumber = b.(uint64)
	}
	if v, ok := fields["log_index"]; ok {
		i, err := workflow.ABIValue(jsonNumbersAsText(v), uint64Type)
		if err != nil {
			return store.Claim{}, usagef("--event: log_index: %v", err)
		}
		base.Index = uint(i.(uint64))
	}
	if v, ok := fields["tx_hash"]; ok {
		b, err := workflow.ABIValue(v, hashType)
		if err != nil {
			return store.Claim{}, usagef("--event: tx_hash %v is not a 32-byte 0x hash", v)
		}
		base.TxHash = common.Hash(b.([32]byte))
	}
	if v, ok := fields["address"]; ok {
		s, isStr := v.(string)
		if !isStr || !common.IsHexAddress(s) {
			return store.Claim{}, usagef("--event: address %v is not a 0x address", v)
		}
		base.Address = common.HexToAddress(s)
	}
	l, err := ev.EncodeLog(base, args)
	if err != nil {
		return store.Claim{}, usagef("--event: %v", err)
	}
	d, err := ev.Decode(l)
	if err != nil {
		return store.Claim{}, fmt.Errorf("--event: decode the synthetic log: %w", err)
	}
	payload, err := trigger.EventPayload{Event: d, Block: l.BlockNumber, Phase: string(chain.PhaseConfirmed), Synthetic: true}.MarshalJSON()
	if err != nil {
		return store.Claim{}, fmt.Errorf("--event: %w", err)
	}
	return store.Claim{Workflow: w.Name, TriggerKey: key, TriggerKind: trigger.Event, Trigger: payload}, nil
}

// jsonNumbersAsText turns json.Numbers (anywhere in v) into their text,
// which workflow.ABIValue reads exactly, whatever their size.
func jsonNumbersAsText(v any) any {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = jsonNumbersAsText(it)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, it := range x {
			out[k] = jsonNumbersAsText(it)
		}
		return out
	}
	return v
}
