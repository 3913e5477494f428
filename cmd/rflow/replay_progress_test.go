package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A replay that ends at once has no rate; one that ran a while has a rate
// as people read it.
func TestReplayRateReadsSensibly(t *testing.T) {
	t.Parallel()
	require.Empty(t, rateText(9626955, 100*time.Microsecond, "runs"), "an instant replay")
	require.Empty(t, rateText(0, time.Minute, "runs"))
	require.Equal(t, "3.5 runs/s", rateText(7, 2*time.Second, "runs"))
	require.Equal(t, "120 blocks/s", rateText(360, 3*time.Second, "blocks"))
}
