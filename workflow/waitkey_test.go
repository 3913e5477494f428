package workflow

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

// TestWaitKeys: equalities on event fields among the top-level && terms
// become index keys (either way round); anything else does not.
func TestWaitKeys(t *testing.T) {
	t.Parallel()
	compile := func(src string) *Expr {
		e, ds := compileExpr(src, Position{}, &scope{vars: map[string]*typ{"event": anyT, "trigger": anyT, "steps": anyT}})
		require.Empty(t, ds)
		return e
	}
	env := Env{"trigger": map[string]any{"event": map[string]any{"sender": "0xAbC0000000000000000000000000000000000001", "amount": int64(7)}}}
	for src, want := range map[string][]string{
		"event.user == trigger.event.sender":                       {"user=h:0xabc0000000000000000000000000000000000001"},
		"trigger.event.amount == event.amount && event.amount > 1": {"amount=n:7"},
		"event.amount > 1": nil,
		"event.user == trigger.event.sender || event.amount == 7":                                        nil,
		"event.amount == event.other":                                                                    nil,
		"event.amount == 115792089237316195423570985008687907853269984665640564039457584007913129639935": {"amount=n:115792089237316195423570985008687907853269984665640564039457584007913129639935"},
	} {
		var got []string
		for _, k := range waitKeys(compile(src)) {
			v, err := k.Value.Eval(env)
			require.NoError(t, err, src)
			iv, ok := IndexValue(v)
			require.True(t, ok, src)
			got = append(got, k.Field+"="+iv)
		}
		require.Equal(t, want, got, src)
	}
}

// TestIndexValueAgreesWithEqual: values == holds for share an index form.
func TestIndexValueAgreesWithEqual(t *testing.T) {
	t.Parallel()
	addr := common.HexToAddress("0xAbC0000000000000000000000000000000000001")
	pairs := [][2]any{
		{int64(7), big.NewInt(7)}, {uint64(7), 7.0}, {addr, "0xabc0000000000000000000000000000000000001"},
		{[]byte{0xab}, "0xAB"}, {true, true}, {"x", "x"},
	}
	for _, p := range pairs {
		require.True(t, equal(p[0], p[1]), "%v == %v", p[0], p[1])
		a, ok := IndexValue(p[0])
		require.True(t, ok)
		b, ok := IndexValue(p[1])
		require.True(t, ok)
		require.Equal(t, a, b, "%v / %v", p[0], p[1])
	}
	_, ok := IndexValue(1.5)
	require.False(t, ok)
	_, ok = IndexValue([]any{1})
	require.False(t, ok)
}
