package workflow

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMarshalRequestJSONKeepsBigIntegersExactAsStrings(t *testing.T) {
	t.Parallel()
	big255 := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(1))
	v := map[string]any{
		"amount": big255, "small": big.NewInt(42), "int": int64(1<<53 - 1), "over": int64(1 << 53),
		"neg": int64(-(1<<53 - 1)), "negover": int64(-(1 << 53)), "float": 1.5,
		"list": []any{big255, 7}, "nested": map[string]any{"x": uint64(1 << 60)},
	}
	b, err := MarshalRequestJSON(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"amount":"`+big255.String()+`","small":42,"int":9007199254740991,"over":"9007199254740992",`+
		`"neg":-9007199254740991,"negover":"-9007199254740992","float":1.5,`+
		`"list":["`+big255.String()+`",7],"nested":{"x":"1152921504606846976"}}`, string(b))

	// The journal's encoding stays exact numbers.
	j, err := MarshalJSON(v)
	require.NoError(t, err)
	require.Contains(t, string(j), `"amount":`+big255.String()+`,`)
}
