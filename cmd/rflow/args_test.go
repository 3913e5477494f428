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
		{"rflow migrate --database-url U", "rflow --database-url U migrate"},
		{"rflow migrate status --database-url=U", "rflow --database-url=U migrate status"},
		{"rflow start -c x.yaml --database-url U --log-level debug", "rflow --database-url U --log-level debug start -c x.yaml"},
		{"rflow dev --database-url U --http :0", "rflow --database-url U dev --http :0"},
		{"rflow runs list --limit 5 --database-url U", "rflow --database-url U runs list --limit 5"},
		{"rflow runs show ID --log-level=warn -o json", "rflow --log-level=warn runs show -o json ID"},
		{"rflow runs list -v", "rflow runs list -v"},
		{"rflow -v", "rflow -v"},
		{"rflow strat --database-url U", "rflow strat --database-url U"},
	} {
		require.Equal(t, tc.want, strings.Join(interspersed(app, strings.Fields(tc.in)), " "), tc.in)
	}
}
