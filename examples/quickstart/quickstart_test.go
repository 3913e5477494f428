package quickstart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/examples/quickstart"
	"github.com/rflow-dev/rflow/workflow"
)

func TestWrittenProjectValidatesStrict(t *testing.T) {
	t.Parallel()
	path, err := quickstart.WriteTo(t.TempDir())
	require.NoError(t, err)
	env := map[string]string{
		quickstart.EnvRPC:        "http://127.0.0.1:8545",
		quickstart.EnvChainID:    "1337",
		quickstart.EnvContract:   "0x5FbDB2315678afecb367f032d93F642f64180aa3",
		quickstart.EnvStartBlock: "0",
		quickstart.EnvEndpoint:   "http://127.0.0.1:9999",
		quickstart.EnvWalletKey:  "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
	}
	p, err := workflow.Load(path, workflow.LoadOptions{Strict: true, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	require.NoError(t, err)
	require.Equal(t, "quickstart", p.Name)
	require.EqualValues(t, 1337, p.Networks[0].ChainID)
	wf := p.Workflow("on-deposit")
	require.NotNil(t, wf)
	require.NotNil(t, wf.Trigger.Event)

	// Without the variables the error names them.
	_, err = workflow.Load(path, workflow.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	require.ErrorContains(t, err, quickstart.EnvContract)
}

func TestABIMatchesTestContract(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("../../testdata/contracts/Emitter.abi.json")
	require.NoError(t, err)
	got, err := quickstart.Files.ReadFile("abis/Emitter.json")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "copy testdata/contracts/Emitter.abi.json to examples/quickstart/abis/Emitter.json again")
}

// WriteMissing keeps what is there: the edits rflow dev's copy carries
// from one session to the next.
func TestWriteMissingKeepsEdits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, written, err := quickstart.WriteMissing(dir)
	require.NoError(t, err)
	require.Equal(t, 3, written) // rflow.yaml, the ABI, the workflow
	wf := filepath.Join(dir, "workflows", "deposits.yaml")
	require.NoError(t, os.WriteFile(wf, []byte("# edited\n"), 0o644))
	require.NoError(t, os.Remove(path))
	again, written, err := quickstart.WriteMissing(dir)
	require.NoError(t, err)
	require.Equal(t, path, again)
	require.Equal(t, 1, written, "only the removed rflow.yaml is written again")
	got, err := os.ReadFile(wf)
	require.NoError(t, err)
	require.Equal(t, "# edited\n", string(got))
}
