package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// -o json is indented as before, and a deeply nested value (a payload
// stored before rflow bounded input depth) prints in proportion to its
// size instead of depth² bytes (128 MB for these 8,000 levels).
func TestWriteJSONBoundsIndentation(t *testing.T) {
	t.Parallel()
	v := map[string]any{"run": map[string]any{"id": "r", "empty": []any{}, "none": map[string]any{}},
		"steps": []any{map[string]any{"output": json.RawMessage(`{"a":[1,{"b":"x\"]}"}]}`)}}, "n": 1}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	var got bytes.Buffer
	require.NoError(t, writeJSON(&got, v))
	require.Equal(t, want.String(), got.String())

	deep := json.RawMessage(strings.Repeat("[", 8_000) + strings.Repeat("]", 8_000))
	got.Reset()
	require.NoError(t, writeJSON(&got, map[string]any{"trigger": deep}))
	require.Less(t, got.Len(), 1<<20, "8,000 levels printed as %d bytes", got.Len())
	require.True(t, json.Valid(got.Bytes()))
}
