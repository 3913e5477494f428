package trigger

import (
	"bytes"
	"encoding/json"
	"strings"
)

// eventMetadata are the fields of an event payload's `event` that the log
// gives, not the ABI: every other field is a decoded argument.
var eventMetadata = map[string]bool{"block": true, "block_hash": true, "tx_hash": true, "log_index": true,
	"tx_log_index": true, "address": true}

// ABIIntegersAsText is payload, a run's trigger of kind k, as outputs people
// script against show it (-o json, the API): every integer the ABI typed
// (an event's arguments, a read's result, at any depth) is its decimal
// string, 42 as "42" like 10^18, as request bodies carry them; the log's
// own numbers (block, log_index) stay numbers. A payload of another kind,
// or one it cannot read, is returned as it is. The journal keeps exact
// numbers.
func ABIIntegersAsText(k Kind, payload json.RawMessage) json.RawMessage {
	var field string
	switch k {
	case Event:
		field = "event"
	case Read:
		field = "result"
	default:
		return payload
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil {
		return payload
	}
	v, ok := p[field]
	if !ok {
		return payload // an undecodable log: its raw log only
	}
	if ev, isMap := v.(map[string]any); isMap && k == Event {
		for name, arg := range ev {
			if !eventMetadata[name] {
				ev[name] = integersAsText(arg)
			}
		}
	} else {
		p[field] = integersAsText(v)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return payload
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// integersAsText replaces every integer in v with its decimal text.
func integersAsText(v any) any {
	switch v := v.(type) {
	case json.Number:
		if !strings.ContainsAny(string(v), ".eE") {
			return string(v)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = integersAsText(e)
		}
	case []any:
		for i, e := range v {
			v[i] = integersAsText(e)
		}
	}
	return v
}
