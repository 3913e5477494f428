package store

import (
	"encoding/json"
	"strings"
)

// SentValue is the value a send step's output records for a person, in
// the network's currency as the engine wrote it (value_text:
// "0.0292 ETH (29200000000000000 wei)"). It is "" for another step, a zero
// value, and an output written before value_text existed.
func (s *StepRun) SentValue() string {
	if s.Kind != "send" || len(s.Output) == 0 {
		return ""
	}
	var out struct {
		ValueText string `json:"value_text"`
	}
	if json.Unmarshal(s.Output, &out) != nil || strings.HasPrefix(out.ValueText, "0 ") {
		return ""
	}
	return out.ValueText
}
