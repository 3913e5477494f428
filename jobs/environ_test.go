package jobs_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

const environProject = `
name: t
env: [RFLOW_TEST_DECLARED]
workflows:
  - name: envs
    trigger: { manual: {} }
    steps:
      - id: all
        http_call: { method: POST, url: "{{URL}}/all", body: "${{ env }}" }
      - id: named
        http_call:
          method: POST
          url: "{{URL}}/named"
          # A computed name is not checked at load time; at run time it can
          # still only reach declared variables.
          body: { declared: "${{ env.RFLOW_TEST_DECLARED }}", other: "${{ env[trigger.input.name] }}" }
`

// TestEnvExposesOnlyDeclaredVariables: a workflow's env holds exactly the
// variables rflow.yaml declares under env:. Other variables of the process
// (an HMAC secret, cloud credentials) reach no request and no journal row,
// even by a name computed at run time. It sets environment variables, so it
// does not run in parallel.
func TestEnvExposesOnlyDeclaredVariables(t *testing.T) {
	t.Setenv("RFLOW_TEST_DECLARED", "visible-value")
	t.Setenv("RFLOW_TEST_UNDECLARED", "hidden-value")
	b := setup(t, environProject)
	require.Equal(t, []string{"RFLOW_TEST_DECLARED"}, b.project.Env)

	id := b.manual(t, "envs", "k1", map[string]any{"name": "RFLOW_TEST_UNDECLARED"})
	run := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, run.Status)

	all := b.recv.got("/all")
	require.Len(t, all, 1)
	var env map[string]any
	require.NoError(t, json.Unmarshal([]byte(all[0].Body), &env))
	require.Equal(t, map[string]any{"RFLOW_TEST_DECLARED": "visible-value"}, env)

	named := b.recv.got("/named")
	require.Len(t, named, 1)
	require.JSONEq(t, `{"declared": "visible-value", "other": null}`, named[0].Body)

	for key, s := range b.steps(t, id) {
		require.NotContains(t, string(s.Input)+string(s.Output), "hidden-value", "step %s journal", key)
	}
}

// TestEnvUndeclaredVariableIsAValidateError: reading a variable the project
// does not declare fails loading, at the reference, with what to do.
func TestEnvUndeclaredVariableIsAValidateError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	src := strings.ReplaceAll(environProject, "{{URL}}", "http://127.0.0.1:1")
	src = strings.Replace(src, "{ declared:", "{ secret: \"${{ env['RFLOW_TEST_UNDECLARED'] }}\", declared:", 1)
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	lookup := func(k string) (string, bool) { return "x", k == "RFLOW_TEST_DECLARED" }
	_, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: lookup})
	var ds workflow.Diagnostics
	require.True(t, errors.As(err, &ds), "want diagnostics, got %v", err)
	require.Len(t, ds, 1, ds.Error())
	require.Equal(t, path+":16:36: in ${{ env['RFLOW_TEST_UNDECLARED'] }}: env.RFLOW_TEST_UNDECLARED is not declared in rflow.yaml env:; add it to expose it; did you mean RFLOW_TEST_DECLARED?", ds[0].String())
}
