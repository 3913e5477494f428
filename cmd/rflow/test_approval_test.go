package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// gatedFixture tests examples/approvals' refund of a large deposit and
// moves its clock past the gate's one-hour timeout.
const gatedFixture = `workflow: refund-deposits
tests:
  - name: a large refund, two hours on
    given:
      - event: { sender: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 3000000000000000000 }
      - advance: 2h
    http:
      - { method: POST, url: "http://127.0.0.1:8090/dev/notify" }
    expect:
      status: completed
      sends: [ { to: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", value: "30000000000000000" } ]
`

// TestTestWarnsApprovalNotExercised: rflow test captures a gated send as if
// approved, so it says, at the step's file:line:col, that the approval:
// (its timeout and on_timeout: among it) is not exercised, on stderr and
// in -o json's warnings; the tests' outcome and exit code are theirs.
func TestTestWarnsApprovalNotExercised(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	dir := filepath.Join(t.TempDir(), "approvals")
	for _, f := range []string{"rflow.yaml", "abis/Emitter.json", "workflows/refunds.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../examples/approvals", f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "refunds.test.yaml"), []byte(gatedFixture), 0o644))

	out, stderr, code := rflowCmd(t, "--database-url", db, "test", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "--- PASS: a large refund, two hours on (")
	warning := regexp.MustCompile(`(?m)^\S*workflows/refunds\.yaml:8:\d+: warning: rflow test does not exercise the approval: of step refund ` +
		`\(timeout 1h, on_timeout: reject\): its send is captured as if approved at once, whatever required: says, ` +
		`and an advance: past the timeout does not expire it \(tested by \S*tests/refunds\.test\.yaml; see docs/testing\.md#limits\)$`)
	require.Regexp(t, warning, stderr)
	require.Len(t, warning.FindAllString(stderr, -1), 1, "one warning per gated step")

	out, stderr, code = rflowCmd(t, "--database-url", db, "test", "-o", "json", dir)
	require.Equal(t, 0, code, stderr)
	var res struct {
		Passed   int      `json:"passed"`
		Warnings []string `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, 1, res.Passed)
	require.Len(t, res.Warnings, 1)
	require.Regexp(t, warning, res.Warnings[0])

	// No test selected: nothing runs, nothing to warn about.
	_, stderr, code = rflowCmd(t, "--database-url", db, "test", "-run", "nothing matches", dir)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "warning", "no test selected, nothing to warn about")
}
