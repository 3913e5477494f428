package workflow

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const explorerWorkflow = `name: w
trigger: { manual: {} }
steps:
  - { id: a, delay: 1s }
`

func TestNetworkExplorer(t *testing.T) {
	p, ds := loadDiagnostics(t, writeFinalityProject(t, "explorer: https://etherscan.io/", explorerWorkflow))
	require.Empty(t, ds.Errors())
	n := p.Network("local")
	require.Equal(t, "https://etherscan.io", n.Explorer)
	require.Equal(t, "https://etherscan.io/tx/0xabc", n.ExplorerTx("0xabc"))
	require.Equal(t, "https://etherscan.io/block/42", n.ExplorerBlock(42))

	p, ds = loadDiagnostics(t, writeFinalityProject(t, "", explorerWorkflow))
	require.Empty(t, ds.Errors())
	require.Empty(t, p.Network("local").ExplorerTx("0xabc"), "no explorer: no link")

	for line, want := range map[string]string{
		"explorer: http://etherscan.io":           `explorer "http://etherscan.io" is not an https URL`,
		"explorer: etherscan.io":                  "is not an https URL",
		"explorer: https://":                      "is not an https URL",
		"explorer: https://u:secret@scan.example": "must not hold credentials",
		"explorer: https://scan.example/?chain=1": "must not have a query or fragment",
		"explorer: [https://a.example]":           "must be a single value",
	} {
		_, ds := loadDiagnostics(t, writeFinalityProject(t, line, explorerWorkflow))
		errs := ds.Errors()
		require.Len(t, errs, 1, "%s: %v", line, ds)
		require.Contains(t, errs[0].Message, want, line)
		require.NotContains(t, errs[0].Message, "secret", "credentials are masked")
		require.Equal(t, 6, errs[0].Pos.Line, "%s: file:line:col of the value", line)
	}
}
