package main

import (
	"path/filepath"
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
	t.Log(out)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- PASS: a large deposit is recorded and alerts (")
	require.Contains(t, out, "--- PASS: the where condition drops an empty deposit (")
	require.Contains(t, out, "3 passed, 0 failed\n")
}
