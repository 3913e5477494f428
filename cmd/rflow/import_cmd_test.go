package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// rflow import oz-monitor lists what it left out on stderr and exits 1
// unless --partial; invalid input names the file and field; a missing
// configuration directory is a usage error.
func TestImportOZMonitorExitCodes(t *testing.T) {
	t.Parallel()
	const cfg = "../../ozimport/testdata/config"
	var out, errOut bytes.Buffer
	dir := filepath.Join(t.TempDir(), "p1")
	require.Equal(t, exitFailure, run([]string{"rflow", "import", "oz-monitor", cfg, "-o", dir}, &out, &errOut))
	require.Contains(t, errOut.String(), `left out: monitors/treasury_guard.json (monitor "Treasury guard"): trigger treasury_mail: email to cfo@example.org`)
	require.Contains(t, errOut.String(), "10 part(s) of the Monitor configuration were left out")
	require.Contains(t, errOut.String(), "pass --partial to accept a partial import")
	require.FileExists(t, filepath.Join(dir, "IMPORT.md"), "the project is written, so IMPORT.md can be read")

	out.Reset()
	errOut.Reset()
	dir = filepath.Join(t.TempDir(), "p2")
	require.Equal(t, 0, run([]string{"rflow", "import", "oz-monitor", "--partial", cfg, "-o", dir}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "created "+dir+"/rflow.yaml")
	require.Contains(t, out.String(), "The project reads START_BLOCK_DEVNET_ANVIL, OPS_HOOK_URL, OPS_HOOK_SECRET,")
	require.Contains(t, errOut.String(), "--partial accepts that")

	bad := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(bad, "networks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "networks", "x.json"), []byte(`{"network_type": "EVM", "slug": "x", "name": "X", "chain_id": 1, "rpc_urls": [{"type_": "rpc", "url": {"type": "plain"}, "weight": 1}]}`), 0o644))
	errOut.Reset()
	require.Equal(t, exitFailure, run([]string{"rflow", "import", "oz-monitor", bad, "-o", filepath.Join(t.TempDir(), "p3")}, &out, &errOut))
	require.Contains(t, errOut.String(), "rflow: networks/x.json: rpc_urls[0].url.value: missing")

	errOut.Reset()
	require.Equal(t, exitUsage, run([]string{"rflow", "import", "oz-monitor", "-o", filepath.Join(t.TempDir(), "p4")}, &out, &errOut))
	require.Contains(t, errOut.String(), "takes one configuration directory")

	errOut.Reset()
	require.Equal(t, exitUsage, run([]string{"rflow", "import", "oz-monitor", cfg}, &out, &errOut))
	require.Contains(t, errOut.String(), "needs -o DIR")
}
