// Package approvals_test checks the approvals example project.
package approvals_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

// TestExampleValidatesStrict: the example loads with no warning, and its
// send is gated on large deposits with a notifier.
func TestExampleValidatesStrict(t *testing.T) {
	t.Parallel()
	// The wallet key is the one variable without a default (rflow dev
	// sets it).
	env := map[string]string{"RFLOW_DEV_WALLET_KEY": "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"}
	p, err := workflow.Load("rflow.yaml", workflow.LoadOptions{Strict: true, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	require.NoError(t, err)
	wf := p.Workflow("refund-deposits")
	require.NotNil(t, wf)
	gate := wf.Steps[0].Send.Approval
	require.NotNil(t, gate)
	require.NotNil(t, gate.Required)
	require.Equal(t, "approvers", gate.Notify)
	require.Equal(t, "reject", gate.OnTimeout)
}
