package workflow

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// conditionABI has a function per result shape a read trigger can get.
const conditionABI = `[
  {"type": "function", "name": "total", "stateMutability": "view", "inputs": [], "outputs": [{"name": "", "type": "uint256"}]},
  {"type": "function", "name": "split", "stateMutability": "view", "inputs": [], "outputs": [{"name": "assets", "type": "uint256"}, {"name": "shares", "type": "uint256"}]},
  {"type": "function", "name": "pair", "stateMutability": "view", "inputs": [], "outputs": [{"name": "", "type": "uint256"}, {"name": "", "type": "uint256"}]},
  {"type": "function", "name": "position", "stateMutability": "view", "inputs": [], "outputs": [{"name": "p", "type": "tuple", "components": [{"name": "owner", "type": "address"}, {"name": "size", "type": "uint256"}]}]},
  {"type": "function", "name": "holders", "stateMutability": "view", "inputs": [], "outputs": [{"name": "", "type": "address[]"}]},
  {"type": "event", "name": "Deposit", "anonymous": false, "inputs": [{"name": "sender", "type": "address", "indexed": true}, {"name": "amount", "type": "uint256", "indexed": false}]}
]`

// loadCondition loads a project whose one workflow has the given trigger
// (YAML flow mapping) and returns the diagnostics, each as "line:col: message".
func loadCondition(t *testing.T, trigger string) []string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "C.json"), []byte(conditionABI), 0o600))
	src := "name: t\nnetworks: [{ name: local, chain_id: 31337, rpc: http://127.0.0.1:8545 }]\n" +
		"contracts: [{ name: C, abi: ./C.json, network: local, address: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\" }]\n" +
		"workflows:\n  - name: w\n    trigger: " + trigger + "\n    steps: [{ id: a, noop: {} }]\n"
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	_, err := Load(path, LoadOptions{LookupEnv: lookup(nil)})
	if err == nil {
		return nil
	}
	ds, ok := err.(Diagnostics)
	require.True(t, ok, "%v", err)
	var out []string
	for _, d := range ds {
		out = append(out, d.String()[len(path)+1:])
	}
	return out
}

// TestConditionsThatCannotSucceedAreValidateErrors: a where:/when: that
// indexes something that is not a list, or divides by a literal zero, would
// fail on every occurrence; validate says so at its position.
func TestConditionsThatCannotSucceedAreValidateErrors(t *testing.T) {
	t.Parallel()
	read := func(fn, when string) string {
		return "{ read: { contract: C, function: " + fn + ", every: 5 blocks, when: \"${{ " + when + " }}\" } }"
	}
	event := func(where string) string {
		return "{ event: { contract: C, event: Deposit, where: \"${{ " + where + " }}\" } }"
	}
	// Columns point at the index, the slice's [ or the operator.
	cases := []struct {
		trigger string
		want    []string
	}{
		{read("total", "result[0] > 1"), []string{"6:89: in ${{ result[0] > 1 }}: cannot index result: it is uint256, not a list or a map"}},
		// Several outputs (or a tuple) are indexable by position, within them.
		{read("split", "result[2] > 1"), []string{"6:89: in ${{ result[2] > 1 }}: index 2 is out of range: split result has 2 values (0 to 1: assets, shares)"}},
		{read("position", "result[2] > 1"), []string{"6:92: in ${{ result[2] > 1 }}: index 2 is out of range: tuple has 2 values (0 to 1: owner, size)"}},
		{read("split", "result[len(result) - 1] > 1"), []string{"6:101: in ${{ result[len(result) - 1] > 1 }}: index result (split result) by a constant position (0 to 1) or by name (assets, shares)"}},
		{event("event[0] == 1"), []string{"6:72: in ${{ event[0] == 1 }}: cannot index event (event Deposit) with integer: it is not a list; read a field by name"}},
		{read("total", "result[1:] == 0"), []string{"6:88: in ${{ result[1:] == 0 }}: cannot slice result: it is uint256, not a list or a string"}},
		{event("event.amount[0] == 1"), []string{"6:79: in ${{ event.amount[0] == 1 }}: cannot index event.amount: it is uint256, not a list or a map"}},
		{event("event.amount / 0 > 1"), []string{"6:79: in ${{ event.amount / 0 > 1 }}: division by zero: event.amount / 0"}},
		{event("event.amount % 0.0 > 1"), []string{"6:79: in ${{ event.amount % 0.0 > 1 }}: division by zero"}},
		// What can succeed stays valid.
		{read("pair", "result[0] > result[1]"), nil},
		{read("split", "result.assets > result['shares']"), nil},
		{read("split", "result[0] > result.shares && result[1] >= 0"), nil},
		{read("pair", "result.arg1 > 0 && result['arg0'] == result[0]"), nil},
		{read("position", "result[1] == result.size && result[0] != ''"), nil},
		{read("position", "result.size > 1"), nil},
		{read("holders", "len(result) > 0 && result[0] != ''"), nil},
		{read("total", "result / 2 > 1"), nil},
		{event("event.amount / 1 > 0 && event['amount'] > 0"), nil},
	}
	for _, c := range cases {
		got := loadCondition(t, c.trigger)
		require.Len(t, got, len(c.want), "%s\n%v", c.trigger, got)
		for i, want := range c.want {
			require.Equal(t, want[:5], got[i][:5], "%s: %s", c.trigger, got[i])
			require.Contains(t, got[i], want[6:], c.trigger)
		}
	}
}
