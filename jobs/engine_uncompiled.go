package jobs

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// uncompiledError is a deployed generation that does not compile against
// this engine's project: it names something (a contract, a wallet, a
// notifier) the project file this process loaded does not declare, say
// after `rflow workflows deploy` of a newer file.
type uncompiledError struct {
	workflow   string
	generation int64
	trigger    string // the kind its spec declares ("event", "cron", …), or ""
	err        error
}

func (e *uncompiledError) Error() string {
	return fmt.Sprintf("compile %s generation %d: %v", e.workflow, e.generation, e.err)
}

func (e *uncompiledError) Unwrap() error { return e.err }

// warnUncompiled logs, once per generation and whichever loop (cron, chain
// triggers) found it, that a deployed generation does not compile here; the
// line names the trigger kind its spec declares.
func (e *Engine) warnUncompiled(err *uncompiledError) {
	key := fmt.Sprintf("%s@%d", err.workflow, err.generation)
	e.plansMu.Lock()
	if e.uncompiled == nil {
		e.uncompiled = map[string]bool{}
	}
	seen := e.uncompiled[key]
	e.uncompiled[key] = true
	e.plansMu.Unlock()
	if seen {
		return
	}
	what := "trigger"
	if err.trigger != "" {
		what = err.trigger + " trigger"
	}
	e.logger.Warn(fmt.Sprintf("workflow %s generation %d does not compile against this process's project file; its %s does not run in this process "+
		"(start a process with the project file that declares what it uses)", err.workflow, err.generation, what),
		"workflow", err.workflow, "generation", err.generation, "trigger", err.trigger, "err", err.err)
}

// specTrigger is the trigger kind a workflow spec declares: the one key of
// its trigger mapping ("" when the spec does not say).
func specTrigger(spec []byte) string {
	var s struct {
		Trigger map[string]json.RawMessage `json:"trigger"`
	}
	if json.Unmarshal(spec, &s) != nil || len(s.Trigger) != 1 {
		return ""
	}
	return slices.Collect(maps.Keys(s.Trigger))[0]
}
