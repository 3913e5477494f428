package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/validate-*.txt from the current output")

// TestValidateGolden runs `rflow validate` on every example project under
// testdata/projects and compares exit code, stdout and stderr with
// testdata/golden/validate-<project>.txt (go test -run TestValidateGolden
// ./cmd/rflow -update rewrites them). It sets environment variables, so it
// does not run in parallel.
func TestValidateGolden(t *testing.T) {
	t.Setenv("OPS_PRIVATE_KEY", "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
	t.Setenv("HOOK_SECRET", "hook-secret")
	t.Setenv("API_SECRET", "api-secret")
	t.Setenv("DATABASE_URL", "postgres://localhost/rflow")
	t.Setenv("SLACK_URL", "https://hooks.slack.example/T0/B0/x")

	dirs, err := filepath.Glob("../../testdata/projects/*/rflow.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	type invocation struct {
		name string
		args []string
	}
	var runs []invocation
	for _, path := range dirs {
		name := filepath.Base(filepath.Dir(path))
		runs = append(runs, invocation{name, []string{"rflow", "validate", "-c", path}})
	}
	runs = append(runs, invocation{"warnings-strict", []string{"rflow", "validate", "--strict", "-c", "../../testdata/projects/warnings/rflow.yaml"}})

	for _, r := range runs {
		var stdout, stderr bytes.Buffer
		code := run(r.args, &stdout, &stderr)
		got := fmt.Sprintf("$ %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(r.args, " "), code, stdout.String(), stderr.String())
		got = strings.ReplaceAll(got, "../../testdata/", "testdata/")
		golden := filepath.Join("../../testdata/golden", "validate-"+r.name+".txt")
		if *update {
			require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			continue
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err, "missing golden file; run go test ./cmd/rflow -run TestValidateGolden -update")
		require.Equal(t, string(want), got, "rflow validate output for %s changed (rerun with -update if intended)", r.name)
	}
}

func TestValidateUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitUsage, run([]string{"rflow", "validate", "extra"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "validate takes no arguments")

	stderr.Reset()
	require.Equal(t, exitFailure, run([]string{"rflow", "validate", "-c", filepath.Join(t.TempDir(), "nope.yaml")}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "nope.yaml: no such project file; pass -c path/to/rflow.yaml, or create a project with `rflow init`")
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())

	// Without -c, in a directory with no rflow.yaml (this package's), it
	// says where it looked.
	stderr.Reset()
	require.Equal(t, exitFailure, run([]string{"rflow", "validate"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "no -c, and ")
	require.Contains(t, stderr.String(), "has no rflow.yaml: no such project file")
}
