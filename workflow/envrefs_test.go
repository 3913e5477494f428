package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// secretsProject declares a credential of every kind through ${VAR}, one
// plain variable under env:, and the workflows of wf (a YAML list).
func secretsProject(t *testing.T, wf string) string {
	t.Helper()
	src := `name: t
database_url: ${PG_URL}
env: [REGION]
api:
  tokens:
    - { name: ci, token: "${CI_TOKEN}", roles: [read, deploy] }
wallets:
  - { name: ops, private_key: "${OPS_PRIVATE_KEY}" }
workflows:
  - name: hook
    trigger: { webhook: { secret: "${HOOK_SECRET}", idempotency_key: "${{ body.id }}" } }
    steps:
      - { id: a, http_call: { url: "https://api.example/x", hmac_secret: "${API_SECRET}" } }
` + wf
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return path
}

var secretsEnv = map[string]string{
	"PG_URL": "postgres://u:p@db/x", "OPS_PRIVATE_KEY": testKey, "CI_TOKEN": "ci-token-0123456789abcdef",
	"HOOK_SECRET": "hook-secret-value", "API_SECRET": "api-secret-value", "REGION": "eu", "HOST": "api.example",
	"DATABASE_URL": "postgres://u:p@db/y", "RFLOW_API_TOKEN": "full-token-0123456789", "ALIAS": testKey,
}

// TestSecretsAreNeverInterpolated: a variable that holds a credential
// resolves only in the field the credential configures; anywhere else in
// a workflow (a URL, a header, a body, a message) it is an error naming
// it, from the project's own files too.
func TestSecretsAreNeverInterpolated(t *testing.T) {
	t.Parallel()
	step := func(field string) string {
		return "  - name: leak\n    trigger: { manual: {} }\n    steps:\n      - { id: s, http_call: " + field + " }\n"
	}
	cases := map[string]string{
		`{ url: "http://x/?k=${OPS_PRIVATE_KEY}" }`:                   "${OPS_PRIVATE_KEY} can never be interpolated into a workflow (it holds wallet ops's private key)",
		`{ url: "http://x/?t=${RFLOW_API_TOKEN}" }`:                   "${RFLOW_API_TOKEN} can never be interpolated into a workflow (it is the command API's token)",
		`{ url: "http://x/?d=${DATABASE_URL}" }`:                      "${DATABASE_URL} can never be interpolated into a workflow (it holds the database URL",
		`{ url: "http://x/", body: { db: "${PG_URL}" } }`:             "${PG_URL} can never be interpolated into a workflow (it holds the database URL)",
		`{ url: "http://x/", headers: { X-T: "${CI_TOKEN}" } }`:       "${CI_TOKEN} can never be interpolated into a workflow (it holds API token ci)",
		`{ url: "http://x/${HOOK_SECRET}" }`:                          "${HOOK_SECRET} can never be interpolated into a workflow (it holds workflow hook's webhook secret)",
		`{ url: "http://x/", body: "${API_SECRET}" }`:                 "${API_SECRET} can never be interpolated into a workflow (it holds an HMAC secret of workflow hook)",
		`{ url: "http://x/?k=${ALIAS}" }`:                             "${ALIAS} holds the value of wallet ops's private key, which can never be interpolated",
		`{ url: "http://x/", hmac_secret: "${OPS_PRIVATE_KEY}" }`:     "${OPS_PRIVATE_KEY} cannot sign or check requests (it holds wallet ops's private key)",
		`{ url: "http://x/", hmac_secret: "${RFLOW_API_TOKEN}" }`:     "${RFLOW_API_TOKEN} cannot sign or check requests",
		`{ url: "http://x/", hmac_secret: "${OWN}", body: "${OWN}" }`: "${OWN} can never be interpolated into a workflow (it holds an HMAC secret of workflow leak)",
	}
	for field, want := range cases {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"OWN": "own-secret-value"}
			for k, v := range secretsEnv {
				env[k] = v
			}
			_, err := Load(secretsProject(t, step(field)), LoadOptions{LookupEnv: lookup(env)})
			requireDiagnostic(t, err, want)
		})
	}

	// Declaring a webhook or HMAC secret under env: is refused as a
	// wallet's key is: env.X would read it.
	path := secretsProject(t, "")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(src), "env: [REGION]", "env: [REGION, HOOK_SECRET]", 1)), 0o600))
	_, err = Load(path, LoadOptions{LookupEnv: lookup(secretsEnv)})
	requireDiagnostic(t, err, "env: HOOK_SECRET is never visible to workflows (it holds workflow hook's webhook secret)")

	// Nor a plain-looking variable holding an API token's value.
	src, err = os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(src), "env: [REGION, HOOK_SECRET]", "env: [REGION, COPY]", 1)), 0o600))
	withCopy := map[string]string{"COPY": secretsEnv["CI_TOKEN"]}
	for k, v := range secretsEnv {
		withCopy[k] = v
	}
	_, err = Load(path, LoadOptions{LookupEnv: lookup(withCopy)})
	requireDiagnostic(t, err, "env: COPY is never visible to workflows (it holds the value of API token ci)")

	// What the files may do stays: a plain variable anywhere, each secret
	// in its own field.
	p, err := Load(secretsProject(t, step(`{ url: "https://${HOST}/x?r=${REGION}", hmac_secret: "${API_SECRET}" }`)), LoadOptions{LookupEnv: lookup(secretsEnv)})
	require.NoError(t, err)
	require.Equal(t, "api-secret-value", p.Workflow("leak").Steps[0].HTTPCall.HMACSecret.Reveal())
}

// TestAPIDefinitionsReadOnlyTheAllowlist: a definition deployed through the
// API resolves ${VAR} only against env:, and its secret fields only the
// webhook and HMAC secrets of the project's files; a stored generation from
// the API compiles under the same rule, one from the files does not.
func TestAPIDefinitionsReadOnlyTheAllowlist(t *testing.T) {
	t.Parallel()
	p, err := Load(secretsProject(t, ""), LoadOptions{LookupEnv: lookup(secretsEnv)})
	require.NoError(t, err)
	def := func(field string) []byte {
		return []byte("name: api\ntrigger: { manual: {} }\nsteps:\n  - { id: s, http_call: " + field + " }\n")
	}
	refused := map[string]string{
		`{ url: "http://x/?k=${OPS_PRIVATE_KEY}&t=${RFLOW_API_TOKEN}&d=${DATABASE_URL}" }`: "${OPS_PRIVATE_KEY} can never be interpolated",
		`{ url: "https://${HOST}/x" }`:                            "${HOST} is not declared under env: in rflow.yaml; a definition deployed through the API reads only the variables declared there",
		`{ url: "https://${HOST:-h}/x" }`:                         "${HOST} is not declared under env:",
		`{ url: "https://h/x", hmac_secret: "${HOST}" }`:          "${HOST} is not a webhook or HMAC secret of rflow.yaml's files nor declared under env:",
		`{ url: "https://h/x", hmac_secret: "${CI_TOKEN}" }`:      "${CI_TOKEN} cannot sign or check requests (it holds API token ci)",
		`{ url: "https://h/x", headers: { A: "${API_SECRET}" } }`: "${API_SECRET} can never be interpolated",
	}
	for field, want := range refused {
		_, err := ParseWorkflow(p, "api.yaml", def(field))
		requireDiagnostic(t, err, want)
	}
	// The whole URL of the issue names each variable.
	_, err = ParseWorkflow(p, "api.yaml", def(`{ url: "http://x/?k=${OPS_PRIVATE_KEY}&t=${RFLOW_API_TOKEN}&d=${DATABASE_URL}" }`))
	var ds Diagnostics
	require.True(t, errors.As(err, &ds))
	require.Contains(t, ds.Error(), "${RFLOW_API_TOKEN}")
	require.Contains(t, ds.Error(), "${DATABASE_URL}")

	w, err := ParseWorkflow(p, "api.yaml", def(`{ url: "https://h/${REGION}", hmac_secret: "${API_SECRET}" }`))
	require.NoError(t, err)
	require.Equal(t, "api-secret-value", w.Steps[0].HTTPCall.HMACSecret.Reveal())

	// A stored spec: under the API's rule when it came from the API.
	spec := []byte(`{"name":"api","trigger":{"manual":{}},"steps":[{"id":"s","http_call":{"url":"https://${HOST}/x"}}]}`)
	_, err = CompileSpec(p, spec, OriginAPI)
	requireDiagnostic(t, err, "${HOST} is not declared under env:")
	got, err := CompileSpec(p, spec, OriginFile)
	require.NoError(t, err)
	require.NotNil(t, got)
}

// TestLiteralCredentialsWarn: a credential written into the file instead of
// ${VAR} is a warning (an error with --strict).
func TestLiteralCredentialsWarn(t *testing.T) {
	t.Parallel()
	src := `name: t
database_url: postgres://u:pw@db/x
api:
  tokens:
    - { name: ci, token: ci-token-0123456789abcdef, roles: [read] }
wallets:
  - { name: ops, private_key: "` + testKey + `" }
workflows:
  - name: hook
    trigger: { webhook: { secret: hook-secret, idempotency_key: "${{ body.id }}" } }
    steps:
      - { id: a, http_call: { url: "https://api.example/x", hmac_secret: s3cret } }
`
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	p, err := Load(path, LoadOptions{LookupEnv: lookup(nil)})
	require.NoError(t, err)
	var got []string
	for _, d := range p.Warnings {
		got = append(got, d.Pos.String()[len(path)+1:]+": "+d.Message)
	}
	require.Equal(t, []string{
		"2:15: database_url holds a password written literally; put the URL in an environment variable and write ${DATABASE_URL}, so the password stays out of the file",
		"5:26: api token ci: token is written literally; put it in an environment variable and write ${VAR} here, so the secret stays out of the file",
		"7:31: wallet ops: private_key is written literally; put it in an environment variable and write ${VAR} here, so the secret stays out of the file",
		"10:35: workflow hook: webhook secret is written literally; put it in an environment variable and write ${VAR} here, so the secret stays out of the file",
		"12:74: step a: hmac_secret is written literally; put it in an environment variable and write ${VAR} here, so the secret stays out of the file",
	}, got)
	_, err = Load(path, LoadOptions{LookupEnv: lookup(nil), Strict: true})
	require.Error(t, err)
}

// TestAPITokens reads api: tokens: and refuses what would make a token no
// gate: unknown roles, duplicate names or values, RFLOW_API_TOKEN's value.
func TestAPITokens(t *testing.T) {
	t.Parallel()
	write := func(tokens string) string {
		path := filepath.Join(t.TempDir(), "rflow.yaml")
		require.NoError(t, os.WriteFile(path, []byte("name: t\napi:\n  tokens:\n"+tokens+"workflows: []\n"), 0o600))
		return path
	}
	env := lookup(map[string]string{"CI": "ci-token-0123456789", "T": "treasury-token-0123456789", "FULL": "full-token-0123456789",
		"RFLOW_API_TOKEN": "full-token-0123456789", "SHORT": "abc"})
	p, err := Load(write("    - { name: ci, token: \"${CI}\", roles: [read, deploy] }\n    - { name: treasury, token: \"${T}\", roles: [read, approve, approve] }\n"),
		LoadOptions{LookupEnv: env})
	require.NoError(t, err)
	require.Len(t, p.APITokens, 2)
	require.Equal(t, "ci", p.APITokens[0].Name)
	require.Equal(t, "ci-token-0123456789", p.APITokens[0].Token.Reveal())
	require.Equal(t, []Role{RoleRead, RoleDeploy}, p.APITokens[0].Roles)
	require.Equal(t, []Role{RoleRead, RoleApprove}, p.APITokens[1].Roles)

	cases := map[string]string{
		"    - { name: ci, token: \"${CI}\", roles: [read, deplyo] }\n":                                             `4:49: api token ci: unknown role "deplyo" (one of read, deploy, approve, operate); did you mean deploy?`,
		"    - { name: ci, token: \"${CI}\", roles: [] }\n":                                                         "4:42: api token ci: roles is empty",
		"    - { name: ci, token: \"${CI}\", roles: [read] }\n    - { name: ci, token: \"${T}\", roles: [read] }\n": `5:15: duplicate api token name "ci"`,
		"    - { name: a, token: \"${CI}\", roles: [read] }\n    - { name: b, token: \"${CI}\", roles: [read] }\n":  "5:18: api token b: its value is also token a's",
		"    - { name: a, token: \"${FULL}\", roles: [read] }\n":                                                    "4:18: api token a: its value is RFLOW_API_TOKEN's",
		"    - { name: a, token: \"${SHORT}\", roles: [read] }\n":                                                   "4:25: api token a: the token is shorter than 16 characters",
		"    - { name: RFLOW_API_TOKEN, token: \"${CI}\", roles: [read] }\n":                                        "4:15: api token name RFLOW_API_TOKEN is reserved",
		"    - { name: a, roles: [read] }\n":                                                                        `4:7: api token a: missing required key "token"`,
	}
	for tokens, want := range cases {
		_, err := Load(write(tokens), LoadOptions{LookupEnv: env})
		requireDiagnostic(t, err, want)
	}
}

// requireDiagnostic checks that err holds a diagnostic containing want.
func requireDiagnostic(t *testing.T, err error, want string) {
	t.Helper()
	var ds Diagnostics
	require.True(t, errors.As(err, &ds), "want diagnostics, got %v", err)
	require.True(t, ds.HasErrors())
	for _, d := range ds {
		if strings.Contains(d.String(), want) {
			return
		}
	}
	t.Fatalf("no diagnostic contains %q:\n%s", want, ds.Error())
}
