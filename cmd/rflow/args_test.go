package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInterspersedFlags(t *testing.T) {
	t.Parallel()
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct{ in, want string }{
		{"rflow runs show ID -o json", "rflow runs show -o json ID"},
		{"rflow --database-url U run wf --key K --input {}", "rflow --database-url U run --key K --input {} wf"},
		{"rflow runs list --failed --limit 5", "rflow runs list --failed --limit 5"},
		{"rflow run wf --key=K", "rflow run --key=K wf"},
		{"rflow run wf -- --not-a-flag", "rflow run wf -- --not-a-flag"},
		{"rflow version", "rflow version"},
	} {
		require.Equal(t, tc.want, strings.Join(interspersed(app, strings.Fields(tc.in)), " "), tc.in)
	}
}
