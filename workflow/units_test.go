package workflow_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/units"
	"github.com/rflow-dev/rflow/workflow"
)

// loadUnits loads a two-network project whose networks and Token contract
// carry the given extra lines, with one native and one token budget.
func loadUnits(t *testing.T, polygon, token string) (*workflow.Project, error) {
	t.Helper()
	abi, err := filepath.Abs("../testdata/projects/reference/abis/Token.json")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
name: t
networks:
  - { name: mainnet, chain_id: 1, rpc: http://127.0.0.1:8545 }
  - { name: polygon, chain_id: 137, rpc: http://127.0.0.1:8546`+polygon+` }
wallets:
  - { name: ops, private_key: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d" }
contracts:
  - { name: Token, abi: `+abi+`, network: polygon, address: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"`+token+` }
workflows:
  - name: pay
    trigger: { manual: {} }
    budgets:
      - { name: gas, asset: native, cap: "5 ether", window: 24h }
      - { name: payouts, asset: Token, cap: "1000000000", window: 24h }
    steps:
      - id: tip
        send: { wallet: ops, network: polygon, to: "0x000000000000000000000000000000000000dEaD", value: "1", budget: gas }
      - id: pay
        send: { wallet: ops, contract: Token, function: transfer, args: ["0x000000000000000000000000000000000000dEaD", 5], budget: payouts }
`), 0o644))
	return workflow.Load(path, workflow.LoadOptions{})
}

func TestCurrencyAndTokenUnits(t *testing.T) {
	t.Parallel()
	p, err := loadUnits(t, `, currency: { symbol: POL, decimals: 18 }`, `, token: { symbol: USDC, decimals: 6 }`)
	require.NoError(t, err)
	require.Equal(t, units.Ether(), p.NativeUnit("mainnet"), "a network without currency: pays in ETH")
	require.Equal(t, units.Native("POL", 18), p.NativeUnit("polygon"))
	require.Equal(t, units.Token("USDC", 6), p.AssetUnit("Token", ""))
	b := p.Workflows[0].Budgets
	require.Equal(t, units.Native("POL", 18), b[0].Unit, "a native budget counts in the currency of its sends' network")
	require.Equal(t, units.Token("USDC", 6), b[1].Unit)
	require.Equal(t, "1,000 USDC (1000000000)", b[1].Unit.Format(b[1].Cap))

	p, err = loadUnits(t, "", "")
	require.NoError(t, err)
	require.Equal(t, units.Ether(), p.Workflows[0].Budgets[0].Unit)
	require.Equal(t, units.Unknown("Token"), p.Workflows[0].Budgets[1].Unit, "no token: no guessed decimals")
}

func TestCurrencyErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ polygon, token, msg string }{
		{`, currency: { symbol: POL }`, "", `currency: missing required key "decimals"`},
		{`, currency: { decimals: 18 }`, "", `currency: missing required key "symbol"`},
		{`, currency: { symbol: POL, decimals: 78 }`, "", "decimals"},
		{`, currency: { symbol: POL, decimals: 18, name: Polygon }`, "", "name"},
		{`, currency: POL`, "", "currency"},
		{"", `, token: { symbol: "", decimals: 6 }`, "symbol must be 1 to 16 characters"},
		{"", `, token: { symbol: USDC, decimals: -1 }`, "decimals"},
	} {
		_, err := loadUnits(t, tc.polygon, tc.token)
		require.ErrorContains(t, err, tc.msg, tc.polygon+tc.token)
		require.ErrorContains(t, err, "rflow.yaml:", "errors point at the file")
	}
}
