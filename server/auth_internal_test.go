package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

// authorized accepts the bearer token or a console session, and nothing
// else; the session is the one the console's login form set.
func TestAuthorizedTakesTokenOrSession(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: auth\nworkflows:\n  - name: m\n    trigger: { manual: {} }\n    steps:\n      - { id: n, noop: {} }\n"), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	pool := storetest.Pool(t)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: p})
	require.NoError(t, err)
	s, err := New(Config{Pool: pool, Engine: e, APIToken: "s3cret"})
	require.NoError(t, err)

	login := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {"s3cret"}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, login)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, console.SessionCookie, cookies[0].Name)

	req := func(set func(*http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/riverui/", nil)
		set(r)
		return r
	}
	require.False(t, s.authorized(req(func(*http.Request) {})))
	require.False(t, s.authorized(req(func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") })))
	require.False(t, s.authorized(req(func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: "forged"})
	})))
	require.True(t, s.authorized(req(func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") })))
	require.True(t, s.authorized(req(func(r *http.Request) { r.AddCookie(cookies[0]) })))
}
