package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// The scaffold's tests pass, on a database and in seconds, and leave no
// row behind.
func TestScaffoldTestPasses(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)
	out, stderr, code := rflowCmd(t, "--database-url", db, "test", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- PASS: a large deposit is recorded and alerts (")
	require.Contains(t, out, "--- PASS: the where condition drops an empty deposit (")
	require.True(t, strings.HasSuffix(out, "3 passed, 0 failed\n"), out)
}

// A wrong expectation fails its test with a diff and exit code 1; the
// other tests still pass, and -run selects.
func TestWrongExpectationFails(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	dir := filepath.Join(t.TempDir(), "proj")
	_, stderr, code := rflowCmd(t, "init", dir)
	require.Equal(t, 0, code, stderr)
	fixture := filepath.Join(dir, "tests", "deposits.test.yaml")
	src, err := os.ReadFile(fixture)
	require.NoError(t, err)
	wrong := strings.Replace(string(src), `amount: "2000000000000000000" }`, `amount: "3000000000000000000" }`, 1)
	require.NotEqual(t, string(src), wrong)
	require.NoError(t, os.WriteFile(fixture, []byte(wrong), 0o644))

	out, stderr, code := rflowCmd(t, "--database-url", db, "test", dir)
	t.Log(out)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- FAIL: a large deposit is recorded and alerts (")
	require.Contains(t, out, "--- PASS: a small deposit is recorded without an alert (")
	require.Contains(t, out, `requests[0].body.amount: want "3000000000000000000", got "2000000000000000000"`)
	require.Contains(t, out, "tests/deposits.test.yaml:23:81: requests[0]") // the amount's place in the fixture
	require.Contains(t, out, "-     \"amount\": \"3000000000000000000\",\n        +     \"amount\": \"2000000000000000000\",")
	require.True(t, strings.HasSuffix(out, "2 passed, 1 failed\n"), out)

	out, _, code = rflowCmd(t, "--database-url", db, "test", "-run", "small", dir)
	require.Equal(t, 0, code, out)
	require.Equal(t, "1 passed, 0 failed\n", out[strings.Index(out, "\n")+1:])
}
