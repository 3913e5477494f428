package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestInitScaffoldValidatesStrict(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "My Vault_Ops")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"rflow", "init", dir}, &out, &errOut), errOut.String())
	for _, f := range []string{"rflow.yaml", "abis/Emitter.json", "contracts/Emitter.bin", "workflows/deposits.yaml", "tests/deposits.test.yaml"} {
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

func TestInitRefusesNonEmptyDirUnlessForce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows", "deposits.yaml")
	notes := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(wf), 0o755))
	require.NoError(t, os.WriteFile(wf, []byte("mine\n"), 0o644))
	require.NoError(t, os.WriteFile(notes, []byte("keep\n"), 0o644))

	var out, errOut bytes.Buffer
	require.Equal(t, exitFailure, run([]string{"rflow", "init", dir}, &out, &errOut))
	require.Contains(t, errOut.String(), dir+" is not empty (notes.txt, workflows)")
	require.Contains(t, errOut.String(), "--force")
	got, err := os.ReadFile(wf)
	require.NoError(t, err)
	require.Equal(t, "mine\n", string(got))
	require.NoFileExists(t, filepath.Join(dir, "rflow.yaml"), "init wrote files although it refused")

	// --force replaces the scaffold's own files and leaves the rest alone.
	out.Reset()
	errOut.Reset()
	require.Equal(t, 0, run([]string{"rflow", "init", "--force", dir}, &out, &errOut), errOut.String())
	got, err = os.ReadFile(wf)
	require.NoError(t, err)
	require.Contains(t, string(got), "name: on-deposit")
	got, err = os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, "keep\n", string(got))
	require.FileExists(t, filepath.Join(dir, "rflow.yaml"))

	require.Equal(t, exitUsage, run([]string{"rflow", "init", "a", "b"}, &out, &errOut))
}

// TestInitThenDevRunsTheScaffold follows the README's "Your first
// workflow" as a new user would: `rflow init DIR`, then `rflow dev
// --project DIR` (a real process; the database is storetest's, where the
// README's run would start an embedded one), until a run of the scaffold's
// own workflow completes, seen through `rflow runs list`.
func TestInitThenDevRunsTheScaffold(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "rflow init my-project\nrflow dev --project my-project\n",
		"the README's first workflow must say exactly the commands this test runs")

	dir := filepath.Join(t.TempDir(), "my-project")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)

	dbURL := storetest.URL(t)
	started := time.Now()
	p := startRflowArgs(t, nil, "--database-url", dbURL, "dev", "--project", dir, "--http", "127.0.0.1:0",
		"--emit-every", "500ms", "--chain", devchain.BackendSimulated)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rflow dev said:\n%s", p.out)
		}
	})
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", dbURL, "runs", "list", "--workflow", "on-deposit",
			"--status", "completed", "-o", "json")
		var page struct {
			Runs []struct {
				ID string `json:"id"`
			} `json:"runs"`
		}
		return code == 0 && json.Unmarshal([]byte(out), &page) == nil && len(page.Runs) > 0
	}, 30*time.Second, 200*time.Millisecond, "no completed run of the scaffold's workflow within 30s")
	t.Logf("first completed run %s after rflow dev started", time.Since(started).Round(time.Millisecond))

	require.Contains(t, p.out.String(), "rflow dev project my-project ("+filepath.Join(dir, "rflow.yaml")+", 1 workflow(s))")
	// The live view polls the journal: it shows the run a moment later.
	viewed := regexp.MustCompile(`run=\S+ workflow=on-deposit step=record completed[\s\S]*run=\S+ workflow=on-deposit completed`)
	require.Eventually(t, func() bool { return viewed.MatchString(p.out.String()) }, 5*time.Second, 100*time.Millisecond,
		"the live view did not show the run")
}
