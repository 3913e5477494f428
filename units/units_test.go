package units_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/units"
)

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

func TestFormat(t *testing.T) {
	t.Parallel()
	usdc := units.Token("USDC", 6)
	for _, tc := range []struct {
		name string
		unit units.Unit
		v    *big.Int
		want string
	}{
		{"zero", units.Ether(), big.NewInt(0), "0 ETH"},
		{"nil is zero", units.Ether(), nil, "0 ETH"},
		{"one wei", units.Ether(), big.NewInt(1), "0.000000000000000001 ETH (1 wei)"},
		{"one ether", units.Ether(), pow10(18), "1 ETH (1000000000000000000 wei)"},
		{"the issue's example", units.Ether(), big.NewInt(29200000000000000), "0.0292 ETH (29200000000000000 wei)"},
		{"10^30 wei", units.Ether(), pow10(30), "1,000,000,000,000 ETH (1000000000000000000000000000000 wei)"},
		{"grouped with a fraction", units.Ether(), new(big.Int).Add(new(big.Int).Mul(big.NewInt(1234567), pow10(18)), big.NewInt(5e17)),
			"1,234,567.5 ETH (1234567500000000000000000 wei)"},
		{"max uint256", units.Ether(), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)),
			"115,792,089,237,316,195,423,570,985,008,687,907,853,269,984,665,640,564,039,457.584007913129639935 ETH " +
				"(115792089237316195423570985008687907853269984665640564039457584007913129639935 wei)"},
		{"negative", units.Ether(), big.NewInt(-15e17), "-1.5 ETH (-1500000000000000000 wei)"},
		{"6-decimal token", usdc, big.NewInt(1250500000), "1,250.5 USDC (1250500000)"},
		{"6-decimal token, one unit", usdc, big.NewInt(1), "0.000001 USDC (1)"},
		{"6-decimal token, whole", usdc, big.NewInt(1_000_000), "1 USDC (1000000)"},
		{"0-decimal token, small", units.Token("PTS", 0), big.NewInt(42), "42 PTS"},
		{"0-decimal token, large", units.Token("PTS", 0), big.NewInt(42_000), "42,000 PTS (42000)"},
		{"native of another chain", units.Native("POL", 18), pow10(17), "0.1 POL (100000000000000000 wei)"},
		{"native without wei", units.Native("XYZ", 8), big.NewInt(150000000), "1.5 XYZ (150000000)"},
		{"unknown decimals", units.Unknown("Token"), big.NewInt(1500000), "1500000 base units of Token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.unit.Format(tc.v))
		})
	}
}

func TestDecimal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v        *big.Int
		decimals int
		want     string
	}{
		{big.NewInt(0), 18, "0"},
		{big.NewInt(1), 18, "0.000000000000000001"},
		{pow10(18), 18, "1"},
		{pow10(30), 18, "1000000000000"},
		{big.NewInt(1500000), 6, "1.5"},
		{big.NewInt(-1), 6, "-0.000001"},
		{big.NewInt(123), 0, "123"},
		{big.NewInt(5), -3, "5"},                     // clamped: display never fails
		{big.NewInt(5), 500, "0." + zeros(76) + "5"}, // clamped to 77
	} {
		require.Equal(t, tc.want, units.Decimal(tc.v, tc.decimals), "%s at %d", tc.v, tc.decimals)
	}
	require.Equal(t, "1,000,000,000,000", units.Grouped(pow10(30), 18))
	require.Equal(t, "999", units.Grouped(big.NewInt(999), 0))
	require.Equal(t, "1,000", units.Grouped(big.NewInt(1000), 0))
	require.Equal(t, "-12,345.6", units.Grouped(big.NewInt(-123456), 1))
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s        string
		decimals int
		want     *big.Int
	}{
		{"1.5", 18, big.NewInt(15e17)},
		{"0.0292", 18, big.NewInt(29200000000000000)},
		{"1_000", 0, big.NewInt(1000)},
		{"-0.000001", 6, big.NewInt(-1)},
		{".5", 1, big.NewInt(5)},
		{"2.", 0, big.NewInt(2)},
		{"1.50000", 1, big.NewInt(15)},
		{"1000000000000", 18, pow10(30)},
	} {
		got, err := units.Parse(tc.s, tc.decimals)
		require.NoError(t, err, tc.s)
		require.Zero(t, tc.want.Cmp(got), "%s: got %s", tc.s, got)
	}
	for _, bad := range []struct {
		s        string
		decimals int
		msg      string
	}{
		{"1.25", 1, "more than 1 decimal places"},
		{"1e18", 18, "not a decimal number"},
		{"+1", 18, "not a decimal number"},
		{"1,000", 0, "not a decimal number"},
		{"", 0, "not a decimal number"},
		{".", 0, "not a decimal number"},
		{"1.2.3", 5, "not a decimal number"},
		{"--1", 0, "not a decimal number"},
		{"1", 78, "out of range"},
		{"1" + zeros(250), 0, "too large"},
	} {
		_, err := units.Parse(bad.s, bad.decimals)
		require.ErrorContains(t, err, bad.msg, bad.s)
	}
}

func TestColumn(t *testing.T) {
	t.Parallel()
	eth := units.Ether()
	got := units.Column([]string{eth.Format(pow10(19)), eth.Format(big.NewInt(0)), eth.Format(big.NewInt(29200000000000000))})
	require.Equal(t, []string{
		"10      ETH (10000000000000000000 wei)",
		" 0      ETH",
		" 0.0292 ETH (29200000000000000 wei)",
	}, got)
}
