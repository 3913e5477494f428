package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

// TestEveryStepKindHasARow: a kind the parser accepts but the table lacks
// would silently run as an unknown effect.
func TestEveryStepKindHasARow(t *testing.T) {
	t.Parallel()
	table := stepKinds()
	for _, k := range workflow.StepKinds() {
		row, ok := table[k]
		require.True(t, ok, "step kind %s has no row in jobs/step_kinds.go", k)
		if !row.effect {
			require.NotNil(t, row.arrive, "pure step kind %s needs an arrive function", k)
			require.Nil(t, row.exec, "pure step kind %s cannot have a worker executor", k)
		}
	}
	require.Len(t, table, len(workflow.StepKinds()), "a row for a kind the parser does not accept")
}
