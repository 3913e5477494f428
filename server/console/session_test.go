package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store/storetest"
)

// Without an API token the console is off: every page says how to turn it
// on, and no login can succeed.
func TestConsoleOffWithoutToken(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	p := loadProject(t, "http://127.0.0.1:1")
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, Project: p})
	require.NoError(t, err)
	srv, err := server.New(server.Config{Pool: pool, Engine: e})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	c := noRedirects(nil)
	for _, do := range []func() (*http.Response, error){
		func() (*http.Response, error) { return c.Get(ts.URL + "/ui/") },
		func() (*http.Response, error) { return c.Get(ts.URL + "/ui/login") },
		func() (*http.Response, error) { return c.PostForm(ts.URL+"/ui/login", url.Values{"token": {""}}) },
	} {
		res, err := do()
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		require.Contains(t, string(body), "RFLOW_API_TOKEN")
		require.Empty(t, res.Cookies())
	}
}

// A login form posted from another origin is refused before the token is
// even looked at, and what a page echoes of a request is escaped.
func TestConsoleRefusesCrossOriginAndEscapes(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	c := noRedirects(nil)
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := c.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Empty(t, res.Cookies())

	res, err = c.PostForm(b.srv.URL+"/ui/login", url.Values{"token": {testToken}})
	require.NoError(t, err)
	res.Body.Close()
	require.Len(t, res.Cookies(), 1)
	cookie := res.Cookies()[0]
	get, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/ui/?status="+url.QueryEscape("<script>x</script>"), nil)
	get.AddCookie(cookie)
	res, err = c.Do(get)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.NotContains(t, string(body), "<script>x</script>")
	require.Contains(t, string(body), "&lt;script&gt;")
	require.Contains(t, string(body), `<h1 id="heading">Not understood</h1>`)
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))

	// A run that does not exist is "Not found", not a refused action.
	get, _ = http.NewRequest(http.MethodGet, b.srv.URL+"/ui/runs/"+uuid.NewString(), nil)
	get.AddCookie(cookie)
	res, err = c.Do(get)
	require.NoError(t, err)
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Contains(t, string(body), `<h1 id="heading">Not found</h1>`)
}
