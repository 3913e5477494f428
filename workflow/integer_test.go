package workflow

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/stretchr/testify/require"
)

func TestIntegerStringsAreDecimalUnlessHex(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"010": "10", " 010 ": "10", "-010": "-10", "+7": "7", "0x10": "16", "0X10": "16",
		"1_000": "1000", "0xff_ff": "65535", "0": "0", "00": "0",
		"115792089237316195423570985008687907853269984665640564039457584007913129639935": "115792089237316195423570985008687907853269984665640564039457584007913129639935",
	}
	for in, want := range good {
		got, err := parseInteger(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got.String(), in)
	}
	for _, in := range []string{"", "-", "0x", "0o10", "0b11", "1__0", "_1", "1_", "0x_1", "1e3", "1.5", "--1", "ten", "0x1g"} {
		_, err := parseInteger(in)
		require.Error(t, err, in)
	}
}

func TestBigintHelperReadsDecimal(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"bigint('010')":      "10",
		"bigint('010') + 1":  "11",
		"bigint('0x10')":     "16",
		"bigint('1_000')":    "1000",
		"bigint(' 42 ')":     "42",
		"bigint('1.5 gwei')": "1500000000",
		// bigint() is how a workflow turns an address into a number on purpose.
		"bigint('0x00000000000000000000000000000000000000aa')": "170",
	}
	for src, want := range cases {
		got, err := mustExpr(t, src).Eval(nil)
		require.NoError(t, err, src)
		s, err := render(got)
		require.NoError(t, err)
		require.Equal(t, want, s, src)
	}
	for _, src := range []string{"bigint('0o10')", "bigint('0b1')", "bigint('1e3')"} {
		_, err := mustExpr(t, src).Eval(nil)
		require.ErrorContains(t, err, "is not an integer", src)
	}
}

func TestToBigIntRejectsAddresses(t *testing.T) {
	t.Parallel()
	got, err := ToBigInt("010")
	require.NoError(t, err)
	require.Equal(t, "10", got.String())
	_, err = ToBigInt("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	require.ErrorContains(t, err, "is an address, not an integer")
}

func TestUintArgumentsParseDecimalAndRefuseAddresses(t *testing.T) {
	t.Parallel()
	u256, err := abi.NewType("uint256", "", nil)
	require.NoError(t, err)
	u8, err := abi.NewType("uint8", "", nil)
	require.NoError(t, err)
	v, err := convertArg("010", u256)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(10), v)
	v, err = convertArg("010", u8)
	require.NoError(t, err)
	require.Equal(t, uint8(10), v)
	_, err = convertArg("0x5FbDB2315678afecb367f032d93F642f64180aa3", u256)
	require.ErrorContains(t, err, "is an address")

	// At run time: an expression whose value is an address fails the call.
	amount := abi.Argument{Name: "amount", Type: u256}
	m := abi.NewMethod("pay", "pay", abi.Function, "nonpayable", false, false, abi.Arguments{amount}, nil)
	arg := &Value{kind: valueExpr, expr: mustExpr(t, "event.sender")}
	_, err = PackCall(&m, []*Value{arg}, Env{"event": map[string]any{"sender": "0x00000000000000000000000000000000000000aa"}})
	require.ErrorContains(t, err, "is an address, not an integer")
	data, err := PackCall(&m, []*Value{{kind: valueLiteral, lit: "010"}}, nil)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(10), new(big.Int).SetBytes(data[4:]))
}

func TestIntegerLiteralsAboveInt64AreExact(t *testing.T) {
	t.Parallel()
	maxU256 := "115792089237316195423570985008687907853269984665640564039457584007913129639935"
	cases := map[string]string{
		maxU256:                         maxU256,
		maxU256 + " == 2 ** 256 - 1":    "true",
		maxU256 + " - 1":                "115792089237316195423570985008687907853269984665640564039457584007913129639934",
		"9223372036854775808":           "9223372036854775808",
		"-9223372036854775808":          "-9223372036854775808",
		"9_223_372_036_854_775_808 + 1": "9223372036854775809",
		"0xffffffffffffffffffff":        "1208925819614629174706175",
		"[1, 18446744073709551616][1]":  "18446744073709551616",
		"event.amount < " + maxU256:     "true",
		"'" + maxU256 + "'":             maxU256, // strings are not touched
	}
	env := Env{"event": map[string]any{"amount": big.NewInt(5)}}
	for src, want := range cases {
		e := mustExpr(t, src)
		require.Equal(t, src, e.Source())
		got, err := e.Eval(env)
		require.NoError(t, err, src)
		s, err := render(got)
		require.NoError(t, err)
		require.Equal(t, want, s, src)
	}
	// A literal's result is fresh each time: changing it cannot change the
	// compiled expression.
	e := mustExpr(t, maxU256)
	first, err := e.Eval(nil)
	require.NoError(t, err)
	first.(*big.Int).SetInt64(0)
	again, err := e.Eval(nil)
	require.NoError(t, err)
	require.Equal(t, maxU256, again.(*big.Int).String())

	// Positions after a big literal stay where the user wrote them.
	_, ds := compileExpr(maxU256+" + evnt", Position{File: "f.yaml", Line: 1, Col: 1}, testScope())
	require.Len(t, ds, 1)
	require.Equal(t, 1+len(maxU256)+3, ds[0].Pos.Col)
	require.Contains(t, ds[0].Message, "unknown variable evnt")
	require.Contains(t, ds[0].Message, maxU256+" + evnt")
}
