package workflow

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

// testScope is a step scope with an event typed like Vault's Deposit.
func testScope() *scope {
	ev := objectT("event Deposit", map[string]*typ{
		"sender": addrT, "amount": {kind: tInt, name: "uint256"}, "block": intT, "tx_hash": hashT, "log_index": intT, "address": addrT,
	})
	return &scope{vars: map[string]*typ{
		"event": ev, "env": (&Project{Env: []string{"HOME", "NAME", "SLACK_URL"}}).envType(), "run": runT,
		"trigger": objectT("trigger", map[string]*typ{"key": stringT, "kind": stringT, "event": ev}),
		"steps":   objectT("steps", map[string]*typ{"lookup": objectT("step lookup", map[string]*typ{"output": anyT})}),
	}, absent: absentReasons()}
}

func mustExpr(t *testing.T, src string) *Expr {
	t.Helper()
	e, ds := compileExpr(src, Position{File: "f.yaml", Line: 1, Col: 1}, testScope())
	require.Empty(t, ds, "compile %q", src)
	return e
}

// TestExprNullMemberError: reading a field of a value that is null at run
// time (a manual run started without input) says so and how to write it,
// not expr's "cannot fetch … from <nil>".
func TestExprNullMemberError(t *testing.T) {
	t.Parallel()
	_, err := mustExpr(t, "steps.lookup.output.body.tier == 'gold'").Eval(Env{"steps": map[string]any{"lookup": map[string]any{"output": nil}}})
	require.EqualError(t, err, "f.yaml:1:1: evaluate ${{ steps.lookup.output.body.tier == 'gold' }}: "+
		"cannot read .body of a missing (null) value; write ?.body to get null instead, and ?? for a default")
	got, err := mustExpr(t, "steps.lookup.output?.body?.tier ?? 'none'").Eval(Env{"steps": map[string]any{"lookup": map[string]any{"output": nil}}})
	require.NoError(t, err, "the advice works")
	require.Equal(t, "none", got)
}

func big2to255plus1() *big.Int {
	return new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(1))
}

func TestExprBigIntExact(t *testing.T) {
	t.Parallel()
	amount := big2to255plus1()
	want := new(big.Int).Quo(amount, big.NewInt(100))

	fresh := Env{"event": map[string]any{"amount": amount, "sender": common.HexToAddress("0x00000000000000000000000000000000000000aa")}}
	b, err := MarshalJSON(fresh)
	require.NoError(t, err)
	require.Contains(t, string(b), amount.String(), "big ints are written as exact JSON numbers")
	decoded, err := UnmarshalJSON(b)
	require.NoError(t, err)
	roundTripped := Env(decoded.(map[string]any))

	for name, env := range map[string]Env{"fresh": fresh, "round-tripped": roundTripped} {
		got, err := mustExpr(t, "event.amount / 100").Eval(env)
		require.NoError(t, err, name)
		require.Equal(t, 0, want.Cmp(got.(*big.Int)), "%s: got %v", name, got)

		got, err = mustExpr(t, "event.amount - 1 == 2 ** 255").Eval(env)
		require.NoError(t, err, name)
		require.Equal(t, true, got, name)

		got, err = mustExpr(t, "event.amount > ether('1')").Eval(env)
		require.NoError(t, err, name)
		require.Equal(t, true, got, name)

		got, err = mustExpr(t, "event.sender == '0x00000000000000000000000000000000000000AA'").Eval(env)
		require.NoError(t, err, name)
		require.Equal(t, true, got, "%s: addresses compare case-insensitively", name)
	}
}

func TestExprSmallIntsSameFreshAndJournal(t *testing.T) {
	t.Parallel()
	e := mustExpr(t, "event.amount * 3 / 2 + 1")
	for _, v := range []any{big.NewInt(1000), int64(1000), 1000, uint8(200)} {
		got, err := e.Eval(Env{"event": map[string]any{"amount": v}})
		require.NoError(t, err)
		n, ok := toNumber(got)
		require.True(t, ok)
		exp := new(big.Int).Add(new(big.Int).Quo(new(big.Int).Mul(mustBig(v), big.NewInt(3)), big.NewInt(2)), big.NewInt(1))
		require.Equal(t, 0, exp.Cmp(n.i), "%T", v)
	}
}

func mustBig(v any) *big.Int {
	n, _ := toNumber(v)
	return n.i
}

func TestExprHelpers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src  string
		want string
	}{
		{"ether('1.5')", "1500000000000000000"},
		{"ether(2)", "2000000000000000000"},
		{"gwei('0.5')", "500000000"},
		{"units('1.25', 6)", "1250000"},
		{"format_units(ether('1.5'), 18)", "1.5"},
		{"format_units(5, 3)", "0.005"},
		{"bigint('0x10') + 1", "17"},
		{"2 ** 256 - 1", "115792089237316195423570985008687907853269984665640564039457584007913129639935"},
		{"7 / 2", "3"},
		{"-7 % 3", "-1"},
		{"7.0 / 2", "3.5"},
		{"'a' + 'b'", "ab"},
	}
	for _, c := range cases {
		got, err := mustExpr(t, c.src).Eval(nil)
		require.NoError(t, err, c.src)
		s, err := render(got)
		require.NoError(t, err)
		require.Equal(t, c.want, s, c.src)
	}
}

func TestExprRuntimeErrorsNameTheExpression(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"event.amount / (event.amount - event.amount)": "division by zero",
		"ether('1.0000000000000000001')":               "more than 18 decimal places",
		"event.amount * 0.5":                           "without losing precision",
		"2 ** 100000":                                  "exceeds 4096 bits",
	}
	env := Env{"event": map[string]any{"amount": big2to255plus1()}}
	for src, want := range cases {
		_, err := mustExpr(t, src).Eval(env)
		require.Error(t, err, src)
		require.Contains(t, err.Error(), "f.yaml:1:1", src)
		require.Contains(t, err.Error(), "${{ "+src+" }}", src)
		require.Contains(t, err.Error(), want, src)
	}
}

func TestExprCompileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src, want string
		col       int
	}{
		{"evnt.amount", "unknown variable evnt; did you mean event?", 1},
		{"event.amout > 1", "unknown field amout of event Deposit; did you mean amount?", 7},
		{"steps.lokup.output", "unknown field lokup of steps; did you mean lookup?", 7},
		{"result > 1", "result is only available with a read trigger", 1},
		{"item", "only available inside a foreach", 1},
		{"event.amount >= 'abc'", "cannot compare uint256 with string", 14},
		{"event.sender == 5", "cannot compare address with integer", 14},
		{"event.sender + 1", "cannot add address and integer", 14},
		{"ethr('1')", "unknown function ethr; did you mean ether?", 1},
		{"event.amount >", "invalid expression", 0},
		{"run.id.foo", "cannot read field foo of string", 8},
	}
	for _, c := range cases {
		_, ds := compileExpr(c.src, Position{File: "f.yaml", Line: 3, Col: 10}, testScope())
		require.NotEmpty(t, ds, c.src)
		require.Contains(t, ds[0].Message, c.want, c.src)
		if c.col > 0 {
			require.Equal(t, 10+c.col-1, ds[0].Pos.Col, "%s: %s", c.src, ds[0])
		}
	}
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	l := newLoader(func(k string) (string, bool) { return map[string]string{"HOST": "api.example"}[k], k == "HOST" })
	mk := func(s string) *node {
		return &node{kind: nodeScalar, pos: Position{File: "f", Line: 1, Col: 1}, val: s}
	}
	env := Env{"event": map[string]any{"amount": big2to255plus1(), "sender": "0xabc"}}

	v := l.value(mk("${{ event.amount }}"), testScope(), "x")
	got, err := v.Eval(env)
	require.NoError(t, err)
	require.IsType(t, &big.Int{}, got, "a single expression keeps its type")

	v = l.value(mk("https://${HOST}/u/${{ event.sender }}?a=${{ event.amount }}"), testScope(), "x")
	s, err := v.String(env)
	require.NoError(t, err)
	require.Equal(t, "https://api.example/u/0xabc?a="+big2to255plus1().String(), s)

	v = l.value(mk("{{ not an expression }}"), testScope(), "x")
	lit, ok := v.Literal()
	require.True(t, ok)
	require.Equal(t, "{{ not an expression }}", lit)

	v = l.value(mk("${{ {'a': {'b': 1}}.a.b }}"), testScope(), "x")
	got, err = v.Eval(nil)
	require.NoError(t, err)
	require.Equal(t, 1, got, "}} inside the expression does not end it")
	require.Empty(t, l.all)

	l.value(mk("x ${{ event.amount"), testScope(), "x")
	require.Len(t, l.all, 1)
	require.Contains(t, l.all[0].Message, "unterminated")
}

func TestJSONCodec(t *testing.T) {
	t.Parallel()
	b, err := MarshalJSON(map[string]any{
		"z": big2to255plus1(), "a": common.HexToAddress("0x5fbdb2315678afecb367f032d93f642f64180aa3"),
		"h": common.Hash{1}, "f": 1.5, "i": int64(-3), "l": []any{uint8(1), "x"}, "bytes": []byte{0xde, 0xad},
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"0x5FbDB2315678afecb367f032d93F642f64180aa3","bytes":"0xdead","f":1.5,
		"h":"0x0100000000000000000000000000000000000000000000000000000000000000","i":-3,"l":[1,"x"],
		"z":`+big2to255plus1().String()+`}`, string(b))
	v, err := UnmarshalJSON(b)
	require.NoError(t, err)
	m := v.(map[string]any)
	require.Equal(t, 0, big2to255plus1().Cmp(m["z"].(*big.Int)))
	require.Equal(t, int64(-3), m["i"])
	require.Equal(t, 1.5, m["f"])
	require.Equal(t, int64(1), m["l"].([]any)[0])

	_, err = UnmarshalJSON([]byte(`{"a":1} {}`))
	require.Error(t, err)
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := Secret("hunter2")
	for _, out := range []string{s.String(), fmtAll(s)} {
		require.NotContains(t, out, "hunter2")
	}
	b, err := MarshalJSON(map[string]any{"k": s})
	require.NoError(t, err)
	require.NotContains(t, string(b), "hunter2")
	require.Equal(t, "hunter2", s.Reveal())
}

func TestExprTimesKeepExprSemantics(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]any{
		"date('2030-01-02') > date('2030-01-01')":                    true,
		"date('2030-01-02') - date('2030-01-01') == duration('24h')": true,
		"duration('1h') * 2 > duration('90m')":                       true,
		"date('2030-01-01') == date('2030-01-01')":                   true,
	} {
		got, err := mustExpr(t, src).Eval(nil)
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}
	_, err := mustExpr(t, "date('2030-01-01') > 5").Eval(nil)
	require.ErrorContains(t, err, "cannot compare")
}

// TestExprValidExpressionsCompile guards against false positives of the
// load-time checker on expressions people write.
func TestExprValidExpressionsCompile(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"event.amount >= ether('1') and event.sender != '0x0000000000000000000000000000000000000000'",
		"trigger.event.sender == event.sender",
		"steps.lookup.output?.body?.tier ?? 'none'",
		"len(steps.lookup.output.body.wallets) > 0",
		"filter(steps.lookup.output.body.wallets, # != event.sender)",
		"map(steps.lookup.output.body.items, .amount * 2)",
		"not (event.amount > 1) || !(event.block > 2)",
		"string(event.amount) + ' wei'",
		"event['amount'] / 100",
		"event.amount > 0 ? 'positive' : 'zero'",
		"let fee = event.amount / 100; fee > gwei(1) ? fee : 0",
		"upper(env.NAME) matches '^A'",
		"now() > date('2020-01-01')",
		"run.attempt <= 3 and run.id != ''",
		"event.tx_hash + ':' + string(event.log_index)",
		"[event.amount, 2][0] + 1",
	} {
		mustExpr(t, src)
	}
}

func TestExprFreshABIValues(t *testing.T) {
	t.Parallel()
	addr := common.HexToAddress("0x5fbdb2315678afecb367f032d93f642f64180aa3")
	env := Env{"event": map[string]any{"sender": addr, "tx_hash": common.Hash{2}.Hex(), "log_index": uint64(3)}}
	got, err := mustExpr(t, "event.sender + '/' + string(event.log_index)").Eval(env)
	require.NoError(t, err)
	require.Equal(t, addr.Hex()+"/3", got)
	got, err = mustExpr(t, "event.sender == '0x5FBDB2315678AFECB367F032D93F642F64180AA3'").Eval(env)
	require.NoError(t, err)
	require.Equal(t, true, got)
}

func TestExprMissingStepOptionalChaining(t *testing.T) {
	t.Parallel()
	env := Env{"steps": map[string]any{}}
	got, err := mustExpr(t, "steps.lookup?.output ?? 'none'").Eval(env)
	require.NoError(t, err)
	require.Equal(t, "none", got)
	_, err = mustExpr(t, "steps.lookup.output").Eval(env)
	require.Error(t, err)
}

// reservesT is the result of getReserves() returns (uint112 reserve0,
// uint112 reserve1, uint32) as the checker types it.
func reservesT() *typ {
	u := func(n string) *typ { return &typ{kind: tInt, name: n, abi: true} }
	t := objectT("getReserves result", map[string]*typ{"reserve0": u("uint112"), "reserve1": u("uint112"), "arg2": u("uint32")})
	t.order = []string{"reserve0", "reserve1", "arg2"}
	return t
}

// TestExprResultPositions: result[i] reads the i-th output by name, on a
// fresh result and on one read back from the journal alike; an index
// outside the outputs is a compile error at the index.
func TestExprResultPositions(t *testing.T) {
	t.Parallel()
	sc := testScope().with("result", reservesT())
	fresh := Env{"result": map[string]any{"reserve0": big.NewInt(100), "reserve1": big.NewInt(200), "arg2": big.NewInt(7)}}
	b, err := MarshalJSON(map[string]any(fresh))
	require.NoError(t, err)
	decoded, err := UnmarshalJSON(b)
	require.NoError(t, err)
	for _, env := range []Env{fresh, decoded.(map[string]any)} {
		for src, want := range map[string]any{
			"result[0] * 2 == result.reserve1": true,
			"result[1] - result['reserve0']":   int64(100),
			"result[2] == result.arg2":         true,
		} {
			e, ds := compileExpr(src, Position{File: "f.yaml", Line: 1, Col: 1}, sc)
			require.Empty(t, ds, src)
			got, err := e.Eval(env)
			require.NoError(t, err, src)
			if n, ok := toNumber(got); ok && !n.isFloat {
				got = n.i.Int64()
			}
			require.Equal(t, want, got, src)
		}
	}
	_, ds := compileExpr("result[3] > 0", Position{File: "f.yaml", Line: 4, Col: 10}, sc)
	require.Len(t, ds, 1)
	require.Equal(t, "f.yaml:4:17: in ${{ result[3] > 0 }}: index 3 is out of range: getReserves result has 3 values (0 to 2: reserve0, reserve1, arg2)", ds[0].String())
}
