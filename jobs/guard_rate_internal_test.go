package jobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// take is fed transaction start times, which can arrive out of order: a
// late call for an older window is refused, and never resets the newer
// window's count (which would admit more than max in it).
func TestRateWindowRefusesAnOlderWindow(t *testing.T) {
	var w rateWindows
	base := time.Unix(1_700_000_000, 0)
	ok, _ := w.take("g", 1, time.Second, base.Add(1100*time.Millisecond))
	require.True(t, ok, "the first admission of window 1")
	ok, end := w.take("g", 1, time.Second, base.Add(900*time.Millisecond))
	require.False(t, ok, "a transaction that began in window 0 comes after window 1 opened")
	require.Equal(t, base.Add(time.Second), end)
	ok, _ = w.take("g", 1, time.Second, base.Add(1500*time.Millisecond))
	require.False(t, ok, "window 1 still holds its one admission")
	ok, _ = w.take("g", 1, time.Second, base.Add(2*time.Second))
	require.True(t, ok, "window 2 is fresh")
}
