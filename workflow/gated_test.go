package workflow

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// GatedSends finds a workflow's sends with approval: wherever they are
// (steps, a foreach body, finally), in file order, and no other step.
func TestGatedSends(t *testing.T) {
	t.Parallel()
	src := `name: t
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:8545" }
wallets:
  - { name: ops, private_key: "${OPS_KEY}" }
workflows:
  - name: w
    trigger: { manual: {} }
    steps:
      - { id: plain, send: { wallet: ops, to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", value: "1" } }
      - { id: gated, send: { wallet: ops, to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", value: "1", approval: { timeout: 1h } } }
      - id: each
        foreach: "${{ [1, 2] }}"
        steps:
          - { id: inner, send: { wallet: ops, to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", value: "1", approval: {} } }
    finally:
      - { id: last, send: { wallet: ops, to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", value: "1", approval: { on_timeout: proceed } } }
  - name: none
    trigger: { manual: {} }
    steps:
      - { id: a, delay: 1s }
`
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	p, err := Load(path, LoadOptions{LookupEnv: lookup(map[string]string{"OPS_KEY": testKey})})
	require.NoError(t, err)
	var ids []string
	for _, s := range p.Workflow("w").GatedSends() {
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{"gated", "inner", "last"}, ids)
	require.Empty(t, p.Workflow("none").GatedSends())
	require.True(t, ValidProjectName("approvals-example"))
	require.False(t, ValidProjectName("../etc"))
	require.False(t, ValidProjectName(".dev-project"))
}
