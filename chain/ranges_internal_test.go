package chain

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The refusals hosted providers and geth send, and what each says works.
var providerRefusals = []struct {
	name string
	msg  string
	want rangeHint
}{
	{"geth --rpc.rangelimit", "exceed maximum block range 5", rangeHint{limit: 5}},
	{"alchemy", "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no " +
		"limit on the response size, or you can request any block range with a cap of 10K logs in the response. " +
		"Based on your parameters, this block range should work: [0x5b8d80, 0x5b9567]",
		rangeHint{suggested: 0x5b9567 - 0x5b8d80 + 1, limit: 2000}},
	{"infura", "query returned more than 10000 results", rangeHint{results: 10000}},
	{"infura with range", "query returned more than 10000 results. Try with this block range [0x1B3B0B0, 0x1B3B2F6].",
		rangeHint{suggested: 0x1B3B2F6 - 0x1B3B0B0 + 1, results: 10000}},
	{"quicknode", "eth_getLogs is limited to a 10,000 range", rangeHint{limit: 10000}},
	{"no hint", "block range too large", rangeHint{}},
	{"backwards suggestion", "this block range should work: [0x10, 0x5]", rangeHint{}},
}

func TestParseRangeHint(t *testing.T) {
	t.Parallel()
	for _, tc := range providerRefusals {
		require.Equal(t, tc.want, parseRangeHint(tc.msg), tc.name)
		require.True(t, IsRangeError(errors.New(tc.msg)), tc.name)
	}
	require.False(t, IsRangeError(errors.New("block range extends beyond current head block")), "a lagging node")
	require.True(t, lagging(errors.New("block range extends beyond current head block")))
	require.True(t, lagging(fmt.Errorf("logs 1..2: %w", errNodeBehind)))
}

func testNet(maxRange uint64) *netState {
	return &netState{cfg: Network{MaxBlockRange: maxRange}, client: &Client{}}
}

// A refusal that says what works is met at once, not by halving; a
// stated limit holds for every reader of the network, a suggestion only
// for the reader it answered.
func TestSizerMeetsTheProvidersWord(t *testing.T) {
	t.Parallel()
	n := testNet(2000)
	r := newRangeSizer(n, 5000)
	for range 20 {
		r.fit(0)
	}
	require.EqualValues(t, 2000, r.next(), "sparse ranges grow to MaxBlockRange")

	require.Equal(t, rangeRetry, r.refused(errors.New("exceed maximum block range 5"), 100, 2099))
	require.EqualValues(t, 5, r.next(), "straight to the stated limit")
	for range 20 {
		r.fit(0)
	}
	require.EqualValues(t, 5, r.next(), "never grows past it")
	other := newRangeSizer(n, 5000)
	for range 20 {
		other.fit(0)
	}
	require.EqualValues(t, 5, other.next(), "another reader of the network starts below it")

	n = testNet(2000)
	r = newRangeSizer(n, 5000)
	r.size = 1000
	require.Equal(t, rangeRetry, r.refused(errors.New("Log response size exceeded. ... up to a 2K block range ... "+
		"this block range should work: [0x64, 0x6d]"), 100, 1099))
	require.EqualValues(t, 10, r.next(), "the suggested range")

	r = newRangeSizer(testNet(2000), 5000)
	r.size = 1000
	require.Equal(t, rangeRetry, r.refused(errors.New("query returned more than 10000 results"), 100, 1099))
	require.EqualValues(t, 500, r.next(), "a result cap says no size: halve")
	_, target := r.ceiling()
	require.Equal(t, 5000, target, "aiming at 5000 logs stays under a 10000 cap")
	r.limits.lower(0, 1000)
	_, target = r.ceiling()
	require.Equal(t, 500, target, "and a lower cap lowers the aim")

	require.Equal(t, rangeFail, r.refused(errors.New("exceed maximum block range 5"), 7, 7), "one block refused is final")
	require.Equal(t, rangeFail, r.refused(errors.New("execution reverted"), 7, 70))
	require.Equal(t, rangeLagged, r.refused(errors.New("block range extends beyond current head block"), 7, 70))
}

func FuzzParseRangeHint(f *testing.F) {
	for _, tc := range providerRefusals {
		f.Add(tc.msg)
	}
	f.Add("limited to a 99999999999999999999999 range")
	f.Add("up to a 18446744073709551615k block range")
	f.Add("[0x0, 0xffffffffffffffff]")
	f.Fuzz(func(t *testing.T, msg string) {
		h := parseRangeHint(msg)
		// Whatever it says, a sizer meeting it stays within 1..span.
		r := newRangeSizer(testNet(2000), 5000)
		r.size = 1000
		if r.refused(errors.New("range "+msg), 0, 999) == rangeRetry {
			require.GreaterOrEqual(t, r.next(), uint64(1))
			require.Less(t, r.next(), uint64(1000), "%+v", h)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"2": 2 * time.Second, "0": 0, "86400": maxRetryAfter,
		"Tue, 01 Dec 2026 12:00:30 GMT": 30 * time.Second, "Tue, 01 Dec 2026 11:00:00 GMT": 0} {
		got, ok := parseRetryAfter(v, now)
		require.True(t, ok, v)
		require.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "-1", "soon", "99999999999999999999"} {
		_, ok := parseRetryAfter(v, now)
		require.False(t, ok, v)
	}
}
