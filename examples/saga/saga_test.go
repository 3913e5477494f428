// Package saga_test checks the saga example validates and that its
// wait_for where is indexed.
package saga_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

func TestSagaExampleValidatesStrict(t *testing.T) {
	t.Parallel()
	// No variable set: the ${RFLOW_DEV_*:-default} defaults apply, as
	// outside rflow dev.
	p, err := workflow.Load("rflow.yaml", workflow.LoadOptions{Strict: true, LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	wf := p.Workflow("deposit-claimed")
	require.NotNil(t, wf)
	w := wf.Steps[0].WaitFor
	require.NotNil(t, w)
	require.Equal(t, "remind", w.OnTimeoutGoto)
	require.Len(t, w.Event.Keys, 1)
	require.Equal(t, "amount", w.Event.Keys[0].Field)
}
