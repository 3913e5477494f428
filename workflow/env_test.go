package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envProject is a project declaring env (a YAML flow list) whose one
// workflow reads expr in a notify text.
func envProject(t *testing.T, env, expr string) string {
	t.Helper()
	dir := t.TempDir()
	src := "name: t\ndatabase_url: ${PG_URL}\nenv: " + env + "\n" +
		"wallets:\n  - { name: ops, private_key: \"${OPS_KEY}\" }\n  - { name: cold, keystore: ./k.json, password: \"${COLD_PW}\" }\n" +
		"workflows:\n  - name: w\n    trigger: { manual: {} }\n    steps:\n      - { id: a, notify: { webhook: https://hooks.example/x, text: \"" + expr + "\" } }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.json"), []byte("{}"), 0o600))
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return path
}

var envTestVars = map[string]string{
	"PG_URL": "postgres://u:p@db/x", "OPS_KEY": testKey, "COLD_PW": "pw", "DATABASE_URL": "postgres://u:p@db/y",
	"RFLOW_API_TOKEN": "tok", "SLACK_URL": "https://hooks.example/s", "COPY_OF_KEY": strings.TrimPrefix(testKey, "0x"),
	"REGION": "eu", "EMPTY": "",
}

func TestEnvAllowlist(t *testing.T) {
	t.Parallel()
	p, err := Load(envProject(t, "[SLACK_URL, REGION, EMPTY]", "${{ env.SLACK_URL }} ${{ env['REGION'] }} ${{ env.EMPTY }}"), LoadOptions{LookupEnv: lookup(envTestVars)})
	require.NoError(t, err)
	require.Equal(t, []string{"EMPTY", "REGION", "SLACK_URL"}, p.Env)
	text, err := p.Workflows[0].Steps[0].Notify.Text.String(Env{"env": map[string]any{"SLACK_URL": "s", "REGION": "eu", "EMPTY": ""}})
	require.NoError(t, err)
	require.Equal(t, "s eu ", text)

	// No env: at all: workflows see no variable.
	_, err = Load(envProject(t, "[]", "${{ env.HOME }}"), LoadOptions{LookupEnv: lookup(envTestVars)})
	requireDiagnostics(t, err, "11:77: in ${{ env.HOME }}: env.HOME is not declared in rflow.yaml env:; add it to expose it")
}

func TestEnvAllowlistRefusesSecretsAndUnsetVariables(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"[DATABASE_URL]":    "3:7: env: DATABASE_URL is never visible to workflows (it holds the database URL and its credentials); remove it from env:",
		"[RFLOW_API_TOKEN]": "3:7: env: RFLOW_API_TOKEN is never visible to workflows (it is the command API's token); remove it from env:",
		"[PG_URL]":          "3:7: env: PG_URL is never visible to workflows (it holds the database URL); remove it from env:",
		"[OPS_KEY]":         "3:7: env: OPS_KEY is never visible to workflows (it holds wallet ops's private key); remove it from env:",
		"[COLD_PW]":         "3:7: env: COLD_PW is never visible to workflows (it holds wallet cold's keystore password); remove it from env:",
		"[COPY_OF_KEY]":     "3:7: env: COPY_OF_KEY is never visible to workflows (it holds wallet ops's secret); remove it from env:",
		"[NOT_SET]":         "3:7: env: environment variable NOT_SET is not set (declared under env:); set it, or remove it from env:",
		"[REGION, REGION]":  "3:15: env: REGION is declared twice (first at",
		"['1BAD']":          "3:7: env: \"1BAD\" is not an environment variable name",
		"REGION":            "3:6: env must be a list, not",
	}
	for env, want := range cases {
		_, err := Load(envProject(t, env, "x"), LoadOptions{LookupEnv: lookup(envTestVars)})
		requireDiagnostics(t, err, want)
	}
}

// requireDiagnostics checks that err holds exactly one diagnostic, at the
// project file, starting with want (line:col: message).
func requireDiagnostics(t *testing.T, err error, want string) {
	t.Helper()
	var ds Diagnostics
	require.True(t, errors.As(err, &ds), "want diagnostics, got %v", err)
	require.Len(t, ds, 1, ds.Error())
	_, got, _ := strings.Cut(ds[0].String(), "rflow.yaml:")
	require.True(t, strings.HasPrefix(got, want), "got:  %s\nwant: %s", got, want)
}
