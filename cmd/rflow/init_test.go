package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInitScaffoldValidatesStrict(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "My Vault_Ops")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"rflow", "init", dir}, &out, &errOut), errOut.String())
	for _, f := range []string{"rflow.yaml", "abis/Emitter.json", "workflows/deposits.yaml"} {
		require.FileExists(t, filepath.Join(dir, f))
		require.Contains(t, out.String(), filepath.Join(dir, f))
	}
	project, err := os.ReadFile(filepath.Join(dir, "rflow.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(project), "name: my-vault-ops\n")

	out.Reset()
	errOut.Reset()
	code := run([]string{"rflow", "validate", "--strict", "-c", filepath.Join(dir, "rflow.yaml")}, &out, &errOut)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
	require.Contains(t, out.String(), "valid")
	require.Empty(t, errOut.String(), "the scaffold must not warn")
}

func TestInitRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows", "deposits.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(wf), 0o755))
	require.NoError(t, os.WriteFile(wf, []byte("mine\n"), 0o644))

	var out, errOut bytes.Buffer
	require.Equal(t, exitFailure, run([]string{"rflow", "init", dir}, &out, &errOut))
	require.Contains(t, errOut.String(), "not overwriting "+wf)
	got, err := os.ReadFile(wf)
	require.NoError(t, err)
	require.Equal(t, "mine\n", string(got))
	require.NoFileExists(t, filepath.Join(dir, "rflow.yaml"), "init wrote files although it refused")

	require.Equal(t, exitUsage, run([]string{"rflow", "init", "a", "b"}, &out, &errOut))
}
