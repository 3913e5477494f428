package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The overview's lines: a network in sync, one whose triggers are catching
// up (with the share the live view saw done), the runs and the console.
func TestOverviewLines(t *testing.T) {
	t.Parallel()
	age, old := 2.4, 4000.0
	at := int64(600)
	o := overview{
		Networks: []networkStatus{
			{Network: "mainnet", ChainID: 1, Head: 21000000, HeadAgeSeconds: &age, Indexed: 21000000},
			{Network: "base", ChainID: 8453, Head: 1000, HeadAgeSeconds: &old, Indexed: 990, Behind: 10, Triggers: &at, CatchingUp: true},
			{Network: "quiet", ChainID: 5, Head: 7, Indexed: -1},
		},
		Runs:     runTally{Queued: 1, Running: 2, Waiting: 3, Throttled: 4, Failed: 5, Completed: 6},
		Consoles: []string{"http://127.0.0.1:8080/ui/"},
	}
	require.Equal(t, []string{
		"mainnet      head 21000000 (2s old), in sync",
		"base         head 1000 (1h7m old), 10 block(s) behind; backfill at block 600, 400 to go (40% since the view started)",
		"quiet        head 7 (never polled), no block indexed yet",
		"runs         3 running, 7 waiting (4 throttled), 5 failed, 6 completed",
		"console      http://127.0.0.1:8080/ui/",
	}, o.lines(func(n networkStatus) string { return " (40% since the view started)" }))
	require.NotContains(t, o.lines(nil)[1], "since the view started", "rflow status has no start to measure from")
}
