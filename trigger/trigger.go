// Package trigger names the kinds of trigger occurrence that claim runs and
// builds each kind's payload: the JSON a run keeps as its trigger, which
// steps read as `trigger` (plus its key and kind). Every producer (the
// chain service, cron, webhooks, the API and CLI) builds its payload here,
// so the shape is written once and matches what the workflow checker
// declares for the kind (workflow.TriggerVars).
package trigger

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

// Kind is the kind of occurrence that claimed a run (the workflow_runs
// trigger_kind column, `trigger.kind` in expressions).
type Kind string

// Trigger kinds.
const (
	Event   Kind = "event"
	Cron    Kind = "cron"
	Block   Kind = "block"
	Read    Kind = "read"
	Webhook Kind = "webhook"
	Manual  Kind = "manual"
)

// Kinds lists every trigger kind, in the order the docs present them.
func Kinds() []Kind { return []Kind{Event, Cron, Block, Read, Webhook, Manual} }

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds(), k) }

// JSONAppender encodes itself without reflection (a decoded log).
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// EventPayload is an event claim's payload: the decoded log as `event`,
// its block and the phase (head or confirmed) it was claimed in.
type EventPayload struct {
	Event JSONAppender
	Block uint64
	Phase string
	// Synthetic marks an occurrence fired by hand (`rflow run --event`),
	// not emitted on chain: "synthetic": true in the journal.
	Synthetic bool
}

// MarshalJSON encodes the payload without reflection (the ingestion hot
// path).
func (p EventPayload) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 512)
	b = append(b, `{"event":`...)
	b, err := p.Event.AppendJSON(b)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"block":`...)
	b = strconv.AppendUint(b, p.Block, 10)
	b = append(b, `,"phase":`...)
	phase, err := json.Marshal(p.Phase)
	if err != nil {
		return nil, err
	}
	b = append(b, phase...)
	if p.Synthetic {
		b = append(b, `,"synthetic":true`...)
	}
	return append(b, '}'), nil
}

// CronPayload is a cron claim's payload: the scheduled tick (UTC, RFC
// 3339), which is also its key.
type CronPayload struct {
	Tick string `json:"tick"`
}

// BlockPayload is a block claim's payload.
type BlockPayload struct {
	Block     uint64 `json:"block"`
	BlockHash string `json:"block_hash"`
}

// ReadPayload is a read claim's payload: the decoded view result (one
// output as its value, several as an object by name), the block it was read
// at, and for interval reads the poll instant.
type ReadPayload struct {
	Result    any    `json:"result"`
	Block     uint64 `json:"block"`
	BlockHash string `json:"block_hash"`
	Tick      string `json:"tick,omitempty"`
}

// WebhookPayload is a webhook claim's payload: the request's headers
// (lower-case names, those worth keeping) and its JSON body.
type WebhookPayload struct {
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// ManualPayload is the payload of a run started by hand (API or CLI): its
// input, JSON null when none was given.
type ManualPayload struct {
	Input json.RawMessage `json:"input"`
}

// MarshalJSON writes a missing input as null.
func (p ManualPayload) MarshalJSON() ([]byte, error) {
	in := p.Input
	if len(in) == 0 {
		in = json.RawMessage("null")
	}
	return json.Marshal(struct {
		Input json.RawMessage `json:"input"`
	}{in})
}

// ResultNames are the names a read's result gives a view's outputs when it
// has several (ReadPayload.Result is then an object by these names): each
// output's ABI name, or arg<i> for an unnamed one. Expressions also read
// them by position (result[i]).
func ResultNames(outputs abi.Arguments) []string {
	names := make([]string, len(outputs))
	for i, o := range outputs {
		names[i] = o.Name
		if names[i] == "" {
			names[i] = "arg" + strconv.Itoa(i)
		}
	}
	return names
}
