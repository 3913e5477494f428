package chain_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
)

func TestDecodeExactUint256(t *testing.T) {
	t.Parallel()
	n := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, n)
	ev, err := chain.ParseEvent(anviltest.EmitterABIJSON(t), "Deposit")
	require.NoError(t, err)

	huge, ok := new(big.Int).SetString("115792089237316195423570985008687907853269984665640564039457584007913129639935", 10)
	require.True(t, ok) // 2^256-1
	r := e.Transact("deposit", huge)
	require.Len(t, r.Logs, 1)
	d, err := ev.Decode(*r.Logs[0])
	require.NoError(t, err)
	require.Equal(t, 0, huge.Cmp(d.Args["amount"].(*big.Int)))
	require.Equal(t, e.From.Hex(), d.Args["sender"])
	require.Equal(t, r.BlockNumber.Uint64(), d.Block)

	raw, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"amount":`+huge.String(), "uint256 is an exact JSON number, never a float")
	require.Contains(t, string(raw), `"tx_hash":"`+r.TxHash.Hex()+`"`)
	require.NotContains(t, strings.ToLower(string(raw)), "e+")
	viaMap, err := json.Marshal(d.Fields())
	require.NoError(t, err)
	require.Equal(t, string(viaMap), string(raw), "the fast encoder matches encoding/json")
	d.Args["note"] = "quote\" <&> ünïcode"
	d.Args["list"] = []any{big.NewInt(1), "x"}
	raw, err = json.Marshal(d)
	require.NoError(t, err)
	viaMap, err = json.Marshal(d.Fields())
	require.NoError(t, err)
	require.Equal(t, string(viaMap), string(raw))

	_, err = ev.Decode(*e.Transact("claim", big.NewInt(1)).Logs[0])
	require.Error(t, err, "a Claimed log is not a Deposit")
}

func TestParseABIArtifact(t *testing.T) {
	t.Parallel()
	artifact := `{"abi":` + string(anviltest.EmitterABIJSON(t)) + `,"bytecode":"0x"}`
	ev, err := chain.ParseEvent([]byte(artifact), "Claimed")
	require.NoError(t, err)
	require.Equal(t, "Claimed", ev.Name())
	_, err = chain.ParseEvent([]byte(artifact), "Nope")
	require.Error(t, err)
}

func TestIsRangeError(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{"query returned more than 10000 results", "block range too large",
		"Log response size exceeded", "request timed out"} {
		require.True(t, chain.IsRangeError(errString(msg)), msg)
	}
	require.False(t, chain.IsRangeError(errString("connection refused")))
	require.False(t, chain.IsRangeError(nil))
}

type errString string

func (e errString) Error() string { return string(e) }

// The fast JSON encoder must agree with encoding/json on any string value.
func FuzzDecodedJSON(f *testing.F) {
	for _, s := range []string{"plain", `quote"back\slash`, "<&>", "ünï", "\x00\x1f", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := chain.Decoded{Event: "E", Args: map[string]any{s: s, "n": big.NewInt(-5)}}
		fast, err := json.Marshal(d)
		require.NoError(t, err)
		slow, err := json.Marshal(d.Fields())
		require.NoError(t, err)
		require.Equal(t, string(slow), string(fast))
	})
}
