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
	env := map[string]string{
		"RFLOW_RPC":      "http://127.0.0.1:8545",
		"RFLOW_CONTRACT": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
		"HOOK_URL":       "https://hooks.example/saga",
	}
	p, err := workflow.Load("rflow.yaml", workflow.LoadOptions{Strict: true, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	require.NoError(t, err)
	wf := p.Workflow("deposit-claimed")
	require.NotNil(t, wf)
	w := wf.Steps[0].WaitFor
	require.NotNil(t, w)
	require.Equal(t, "remind", w.OnTimeoutGoto)
	require.Len(t, w.Event.Keys, 1)
	require.Equal(t, "amount", w.Event.Keys[0].Field)
}
