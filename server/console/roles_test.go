package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

const (
	readToken    = "ci-token-0123456789abcdef"
	operateToken = "oncall-token-0123456789ab"
)

// tokensProject is project(url) with scoped tokens: ci reads and deploys,
// oncall reads and operates.
func tokensProject(t *testing.T, endpoint string) *workflow.Project {
	t.Helper()
	src := project(endpoint) + `api:
  tokens:
    - { name: ci,     token: "${CI_TOKEN}",     roles: [read, deploy] }
    - { name: oncall, token: "${ONCALL_TOKEN}", roles: [read, operate] }
`
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	env := map[string]string{"CI_TOKEN": readToken, "ONCALL_TOKEN": operateToken}
	p, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	require.NoError(t, err)
	return p
}

func withRiverUI(c *server.Config) { c.River = c.Engine.(*jobs.Engine).Client() }

// login logs the tab in with token through the form.
func (b *tab) login(base, token, sel string) {
	b.t.Helper()
	b.open(base+"/ui/login", "#token")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), token))
	b.submit("#login", sel)
}

// fetchStatus runs fetch(path, init) in the page and returns the status.
func (b *tab) fetchStatus(path, init string) int {
	b.t.Helper()
	return run(b, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, %s).then(r => r.status)`, path, init), chromedp.EvalAwaitPromise))
}

// TestConsoleRolesAndRiverUIInBrowser: in a real Chromium, a read-only
// token sees the console without the buttons it cannot use (and the
// handlers refuse the commands anyway), and opens River UI from the
// console's link on the session cookie, where River UI's actions are
// refused; an operate token gets the buttons and River UI's actions. A
// cross-origin request on the cookie acts on nothing.
func TestConsoleRolesAndRiverUIInBrowser(t *testing.T) {
	t.Parallel()
	b := serve(t, tokensProject(t, newEndpoint(t, 5).URL), withRiverUI)
	br := browser(t)
	failed := b.startRun(t, "flaky-sync")
	b.waitRun(t, failed, store.RunFailed, 1)
	row := fmt.Sprintf(`tr[data-run="%s"]`, failed)

	// Read-only: pages, no buttons.
	br.login(b.srv.URL, readToken, "table.runs")
	require.Contains(t, br.text("#who"), "ci")
	br.open(b.srv.URL+"/ui/dlq", row)
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('button.retry').length`)))
	br.open(b.srv.URL+"/ui/runs/"+failed.String(), "#run-status")
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('#retry').length`)))
	br.open(b.srv.URL+"/ui/workflows", `tr[data-workflow="price-alert"]`)
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('table.workflows button').length`)))
	// A forged retry form (the session's own CSRF token) is refused too.
	csrf := run(br, chromedp.AttributeValue(chromedp.CSS(`.logout input[name=csrf]`), "value")).Value
	code := br.fetchStatus("/ui/runs/"+failed.String()+"/retry",
		fmt.Sprintf(`{method: 'POST', body: new URLSearchParams({csrf: %q, key: %q})}`, csrf, uuid.NewString()))
	require.Equal(t, http.StatusForbidden, code)
	r, err := store.GetRun(context.Background(), b.pool, failed, false)
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempt, "a read token retried a run")
	// A workflow's page shows a read token its definition, not the run
	// form, and a forged run form starts nothing.
	br.open(b.srv.URL+"/ui/workflows/price-alert", "#definition")
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('#run-form').length`)))
	require.Contains(t, br.text("#run-it"), "needs the operate role")
	code = br.fetchStatus("/ui/workflows/price-alert/run",
		fmt.Sprintf(`{method: 'POST', body: new URLSearchParams({csrf: %q, key: %q, field: 'input', data: ''})}`, csrf, uuid.NewString()))
	require.Equal(t, http.StatusForbidden, code)
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'price-alert'`).Scan(&n))
	require.Zero(t, n, "a read token started a run")

	// River UI from the console's link, on the session cookie.
	br.submit("#riverui", "#root")
	require.True(t, strings.HasPrefix(br.location(), b.srv.URL+"/riverui/"), br.location()) // River UI routes itself on to /riverui/jobs
	require.Eventually(t, func() bool {
		ctx, cancel := br.timeout()
		defer cancel()
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		return err == nil && strings.Contains(text, "Jobs") && strings.Contains(text, "Queues")
	}, 20*time.Second, 100*time.Millisecond, "River UI rendered")
	require.Equal(t, http.StatusOK, br.fetchStatus("/riverui/api/jobs?state=completed", "{}"))
	cancelJob := `{method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({ids: ['999999999']})}`
	require.Equal(t, http.StatusForbidden, br.fetchStatus("/riverui/api/jobs/cancel", cancelJob), "read: River UI's actions are refused")

	// Operate: the buttons are there, and River UI acts (no such job: 404,
	// past the guard).
	br.open(b.srv.URL+"/ui/", ".logout button")
	br.submit(".logout button", "#token")
	// River UI without a session: the console's login, which returns there.
	br.open(b.srv.URL+"/riverui/", "#token")
	br.do(chromedp.SendKeys(chromedp.CSS("#token"), operateToken))
	br.submit("#login", "#root")
	require.True(t, strings.HasPrefix(br.location(), b.srv.URL+"/riverui/"), br.location()) // River UI routes itself on to /riverui/jobs
	require.Equal(t, http.StatusNotFound, br.fetchStatus("/riverui/api/jobs/cancel", cancelJob))
	br.open(b.srv.URL+"/ui/dlq", row+" button.retry")
	br.submit(row+" button.retry", "#run-attempt")
	require.Equal(t, "2", br.text("#run-attempt"))

	// The same cookie from another origin, or from a client that names no
	// origin, acts on nothing; reading with it works.
	cookie := sessionCookie(t, br)
	post := func(origin, site string) int {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/riverui/api/jobs/cancel", strings.NewReader(`{"ids":["999999999"]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("http://evil.example", ""))
	require.Equal(t, http.StatusForbidden, post("", "cross-site"))
	require.Equal(t, http.StatusForbidden, post("", ""))
	require.Equal(t, http.StatusNotFound, post(b.srv.URL, ""), "same origin acts")
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/riverui/api/jobs?state=completed", nil)
	require.NoError(t, err)
	req.AddCookie(cookie)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

// sessionCookie is the tab's console session cookie.
func sessionCookie(t *testing.T, br *tab) *http.Cookie {
	t.Helper()
	got, err := chromedp.Call(br.ctx, network.GetCookies, network.GetCookiesParams{})
	require.NoError(t, err)
	for _, c := range got.Cookies {
		if c.Name == console.SessionCookie {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// TestLoginThrottle: after a few wrong tokens a client must wait (429 with
// Retry-After) and even the right token is not checked until then; after
// the wait the right token logs in.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	c := noRedirects(nil)
	login := func(token string) *http.Response {
		res, err := c.PostForm(b.srv.URL+"/ui/login", url.Values{"token": {token}})
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	for i := range access.FreeFailures {
		require.Equal(t, http.StatusUnauthorized, login(fmt.Sprintf("guess-%d", i)).StatusCode, "guess %d", i)
	}
	res := login(testToken)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "the right token waits too")
	wait, err := strconv.Atoi(res.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 1, wait)
	guessed := 0
	for deadline := time.Now().Add(time.Second / 2); time.Now().Before(deadline); {
		if login("guess").StatusCode == http.StatusUnauthorized {
			guessed++
		}
	}
	require.Zero(t, guessed, "no guess is checked while the client waits")
	time.Sleep(time.Duration(wait)*time.Second + 100*time.Millisecond)
	require.Equal(t, http.StatusSeeOther, login(testToken).StatusCode)
	require.Equal(t, http.StatusUnauthorized, login("guess").StatusCode, "a login clears the count")
}

// TestCookieBehindTrustedProxy: the session cookie is Secure when a
// trusted proxy says the browser came over https, and only then.
func TestCookieBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	proxies, err := access.ParseProxies([]string{"127.0.0.1/32"})
	require.NoError(t, err)
	trusting := serve(t, loadProject(t, newEndpoint(t, 0).URL), func(c *server.Config) { c.Proxies = proxies })
	plain := setup(t, 0)
	login := func(base, proto string) *http.Cookie {
		req, err := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		res, err := noRedirects(nil).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Len(t, res.Cookies(), 1)
		return res.Cookies()[0]
	}
	require.True(t, login(trusting.srv.URL, "https").Secure)
	require.False(t, login(trusting.srv.URL, "http").Secure)
	require.False(t, login(trusting.srv.URL, "").Secure)
	require.False(t, login(plain.srv.URL, "https").Secure, "an untrusted peer's header is ignored")
}

// TestStaticDirectoryDoesNotList: the console's static files are served,
// their directory is not listed.
func TestStaticDirectoryDoesNotList(t *testing.T) {
	t.Parallel()
	b := setup(t, 0)
	for path, want := range map[string]int{"/ui/static/": http.StatusNotFound, "/ui/static/console.css": http.StatusOK} {
		res, err := http.Get(b.srv.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, want, res.StatusCode, "%s: %s", path, body)
		require.NotContains(t, string(body), `<a href="console.css">`)
	}
}
