package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/jobs"
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
		return usagef("workflow %s has an event trigger: pass the occurrence to fire it with, e.g. --event '{%s}' (its args, and optionally block, tx_hash, log_index, tx_log_index, address)",
			w.Name, jobs.EventArgsExample(w.Trigger.Event))
	case kind != trigger.Manual && kind != trigger.Event:
		return usagef("workflow %s has a %s trigger: rflow run starts manual workflows (--input) and event workflows (--event)", w.Name, kind)
	}
	return nil
}

// syntheticEventClaim builds the claim of an occurrence of w's event fired
// by hand: the args come from eventJSON and are typed per the ABI (integers
// exact from JSON numbers or decimal strings); the log is ABI-encoded and
// decoded as an ingested one would be, so expressions see the same types.
// The run's trigger is an event one marked "synthetic": true, keyed key,
// with no chain coordinates (a reorg never orphans it). The trigger's
// where: is not applied: the run is asked for by name.
func syntheticEventClaim(p *workflow.Project, w *workflow.Workflow, eventJSON, key string) (store.Claim, error) {
	dec := json.NewDecoder(strings.NewReader(eventJSON))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil || dec.More() || fields == nil {
		if err == nil {
			err = fmt.Errorf("want one JSON object")
		}
		return store.Claim{}, usagef("--event is not a JSON object: %v", err)
	}
	d, l, err := jobs.EventOccurrence(p, w, fields, types.Log{})
	var fe *jobs.EventFieldError
	if errors.As(err, &fe) {
		return store.Claim{}, usagef("--event: %v", fe)
	}
	if err != nil {
		return store.Claim{}, fmt.Errorf("--event: %w", err)
	}
	payload, err := trigger.EventPayload{Event: d, Block: l.BlockNumber, Phase: string(chain.PhaseConfirmed), Synthetic: true}.MarshalJSON()
	if err != nil {
		return store.Claim{}, fmt.Errorf("--event: %w", err)
	}
	return store.Claim{Workflow: w.Name, TriggerKey: key, TriggerKind: trigger.Event, Trigger: payload}, nil
}
