package workflow_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

func loadGuards(t *testing.T, guard string) (*workflow.Project, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
name: t
workflows:
  - name: g
    trigger: { manual: {} }
    `+guard+`
    steps:
      - id: a
        http_call: { method: GET, url: "http://example.test/" }
`), 0o644))
	return workflow.Load(path, workflow.LoadOptions{Strict: true})
}

func TestConcurrencyParses(t *testing.T) {
	p, err := loadGuards(t, `concurrency: { max: 2, key: "${{ trigger.input.who }}" }`)
	require.NoError(t, err, "guards are enforced: --strict has nothing to warn about")
	c := p.Workflows[0].Concurrency
	require.NotNil(t, c)
	require.Equal(t, 2, c.Max)
	require.Equal(t, "trigger.input.who", c.Key.Source())

	_, err = loadGuards(t, `concurrency: { max: 0 }`)
	require.ErrorContains(t, err, "concurrency max")
	_, err = loadGuards(t, `concurrency: { max: 1, keys: x }`)
	require.ErrorContains(t, err, "keys")
	_, err = loadGuards(t, `concurrency: { max: 1, key: "${{ nope.x }}" }`)
	require.ErrorContains(t, err, "nope")
}
