package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/workflow"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const testToken = "console-test-token"

// endpoint answers the workflows' HTTP calls: /price with a JSON quote,
// /flaky with 500 as many times as failures says, then 200.
type endpoint struct {
	*httptest.Server
	mu       sync.Mutex
	failures int
}

func newEndpoint(t *testing.T, failures int) *endpoint {
	e := &endpoint{failures: failures}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/price":
			fmt.Fprint(w, `{"pair":"ETH/USD","price":"3120.55","source":"<b>loopback</b>"}`)
		case "/flaky":
			e.mu.Lock()
			fail := e.failures > 0
			e.failures--
			e.mu.Unlock()
			if fail {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, `{"error":"upstream unavailable"}`)
				return
			}
			fmt.Fprint(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.Close)
	return e
}

func project(url string) string {
	return fmt.Sprintf(`name: consoletest
workflows:
  - name: price-alert
    trigger: { manual: {} }
    steps:
      - id: fetch_price
        http_call: { url: "%[1]s/price" }
      - { id: settle, delay: 10ms }
      - id: notify_desk
        notify: { webhook: "%[1]s/price", text: "ETH at ${{ steps.fetch_price.output.body.price }}" }
  - name: flaky-sync
    trigger: { manual: {} }
    steps:
      - id: push
        http_call: { url: "%[1]s/flaky", method: POST, body: { n: 1 } }
`, url)
}

func loadProject(t *testing.T, endpoint string) *workflow.Project {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(project(endpoint)), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	return p
}

type bundle struct {
	pool *pgxpool.Pool
	e    *jobs.Engine
	srv  *httptest.Server
}

// setup serves a real engine on a fresh database through server.New, the
// handler rflow start --http serves.
func setup(t *testing.T, failures int) *bundle {
	t.Helper()
	return serve(t, loadProject(t, newEndpoint(t, failures).URL))
}

// serve starts an engine for project p on a fresh database, with the
// relayer's backends dialled as rflow start does, and serves it through
// server.New.
func serve(t *testing.T, p *workflow.Project, configure ...func(*server.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	backends, release, err := jobs.DialBackends(ctx, p, nil)
	require.NoError(t, err)
	t.Cleanup(release)
	e, err := jobs.NewEngine(jobs.Config{Pool: pool, URL: url, Project: p, FetchCooldown: time.Millisecond, Backends: backends})
	require.NoError(t, err)
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	require.NoError(t, e.Start(runCtx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		_ = e.Stop(sctx)
		cancel()
	})
	cfg := server.Config{Pool: pool, Engine: e, APIToken: testToken, Tokens: p.APITokens, Networks: p.Networks}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &bundle{pool: pool, e: e, srv: ts}
}

func (b *bundle) startRun(t *testing.T, wf string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		id, _, err = b.e.StartRunTx(context.Background(), tx, store.ManualClaim(wf, uuid.NewString(), nil))
		return err
	}))
	return id
}

func (b *bundle) waitRun(t *testing.T, id uuid.UUID, status store.RunStatus, attempt int) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := store.GetRun(context.Background(), b.pool, id, false)
		require.NoError(t, err)
		return r.Status == status && r.Attempt == attempt
	}, 30*time.Second, 20*time.Millisecond, "run %s never became %s at attempt %d", id, status, attempt)
}

// browser starts headless Chromium, or skips when it is not installed and
// RFLOW_REQUIRE_BROWSER is unset (CI sets it after installing chromium).
func browser(t *testing.T) *tab {
	t.Helper()
	bin := os.Getenv("RFLOW_CHROMIUM")
	if bin == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		if os.Getenv("RFLOW_REQUIRE_BROWSER") != "" {
			t.Fatal("RFLOW_REQUIRE_BROWSER is set but no chromium is installed (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); set RFLOW_REQUIRE_BROWSER=1 to make this a failure")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first action starts the browser, on a context without a deadline
	// (a deadline there would stop the whole browser).
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start chromium %s", bin)
	return &tab{t: t, ctx: ctx}
}

// tab is one browser tab; each helper fails the test on error.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func (b *tab) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, 20*time.Second)
}

func (b *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...))
}

func run[T any](b *tab, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(b.t, err)
	return v
}

// open navigates and waits for sel.
func (b *tab) open(url, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url))
	b.waitVisible(sel)
}

// waitVisible waits for sel, or fails showing the page it is on.
func (b *tab) waitVisible(sel string) {
	b.t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("body")))
		b.t.Fatalf("%s shows no %s: %v\n%s", b.location(), sel, err, html)
	}
}

// submit clicks a button that submits a form and waits until the page it
// leads to has loaded (it may have the same URL) and shows sel.
func (b *tab) submit(button, sel string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](`window.rflowOldPage = true`), chromedp.Click(chromedp.CSS(button)))
	require.Eventually(b.t, func() bool {
		ctx, cancel := b.timeout()
		defer cancel()
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!window.rflowOldPage && document.readyState === 'complete'`))
		return err == nil && loaded
	}, 20*time.Second, 20*time.Millisecond, "clicking %s loaded no new page", button)
	b.waitVisible(sel)
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(run(b, chromedp.Text(chromedp.CSS(sel))))
}

func (b *tab) location() string {
	b.t.Helper()
	return run(b, chromedp.Location())
}

// noRedirects is a client that shows redirects instead of following them.
func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestConsoleInBrowser logs in through the form in a real Chromium, reads
// a completed run's journal, and retries a dead-lettered run from the DLQ:
// a double submit of one retry form is one retry, and a fresh form retries
// again. POSTs without the session's CSRF token, or from another origin,
// change nothing.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t, 2) // flaky-sync fails on its first two calls
	br := browser(t)

	done := b.startRun(t, "price-alert")
	failed := b.startRun(t, "flaky-sync")
	b.waitRun(t, done, store.RunCompleted, 1)
	b.waitRun(t, failed, store.RunFailed, 1)

	// Unauthenticated: the console sends the browser to the login form.
	c := noRedirects(nil)
	res, err := c.Get(b.srv.URL + "/ui/runs/" + done.String())
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/runs/"+done.String()), res.Header.Get("Location"))

	br.open(b.srv.URL+"/ui/", "#token")
	require.Equal(t, b.srv.URL+"/ui/login?next=%2Fui%2F", br.location())
	br.do(chromedp.SendKeys(chromedp.CSS("#token"), "wrong"))
	br.submit("#login", "#login-error")
	require.Contains(t, br.text("#login-error"), "not the API token")

	br.do(chromedp.SendKeys(chromedp.CSS("#token"), testToken))
	br.submit("#login", "table.runs")
	require.Equal(t, b.srv.URL+"/ui/", br.location())
	runsText := br.text("table.runs")
	require.Contains(t, runsText, done.String())
	require.Contains(t, runsText, failed.String())

	// The session cookie is HttpOnly, SameSite=Strict and opaque.
	cookies, err := chromedp.Call(br.ctx, network.GetCookies, network.GetCookiesParams{})
	require.NoError(t, err)
	require.Len(t, cookies.Cookies, 1)
	ck := cookies.Cookies[0]
	require.Equal(t, console.SessionCookie, ck.Name)
	require.True(t, ck.HTTPOnly)
	require.Equal(t, network.CookieSameSiteStrict, ck.SameSite)
	require.NotContains(t, ck.Value, testToken)

	// Filters: only failed runs.
	br.open(b.srv.URL+"/ui/?status=failed", "table.runs")
	runsText = br.text("table.runs")
	require.Contains(t, runsText, failed.String())
	require.NotContains(t, runsText, done.String())

	// The completed run's journal: every step, its status and output.
	br.open(b.srv.URL+"/ui/runs/"+done.String(), "table.journal")
	require.Equal(t, "completed", br.text("#run-status"))
	steps := run(br, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr.step')].map(r => r.dataset.step + ' ' + r.querySelector('.status').textContent)`))
	require.Equal(t, []string{"fetch_price completed", "settle completed", "notify_desk completed"}, steps)
	journal := br.text("table.journal")
	require.Contains(t, journal, `"price": "3120.55"`)
	// The endpoint's markup is shown as text, never interpreted.
	require.Contains(t, journal, `<b>loopback</b>`)
	if out := os.Getenv("RFLOW_CONSOLE_SCREENSHOT"); out != "" {
		png := run(br, chromedp.FullScreenshot(100))
		require.NoError(t, os.WriteFile(out, png, 0o644))
	}

	// The DLQ lists the failed run with a retry form; its key and CSRF
	// token are read before the click, to replay the submit afterwards.
	row := fmt.Sprintf(`tr[data-run="%s"]`, failed)
	br.open(b.srv.URL+"/ui/dlq", row)
	key := run(br, chromedp.AttributeValue(chromedp.CSS(row+` input[name=key]`), "value")).Value
	csrf := run(br, chromedp.AttributeValue(chromedp.CSS(row+` input[name=csrf]`), "value")).Value
	require.NotEmpty(t, key)
	require.NotEmpty(t, csrf)

	// A POST without the CSRF token, from the console's own page: 403.
	code := run(br, chromedp.Evaluate[int](fmt.Sprintf(
		`fetch('/ui/runs/%s/retry', {method: 'POST', body: new URLSearchParams({key: %q})}).then(r => r.status)`,
		failed, uuid.NewString()), chromedp.EvalAwaitPromise))
	require.Equal(t, http.StatusForbidden, code)
	r, err := store.GetRun(context.Background(), b.pool, failed, false)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, r.Status, "a POST without the CSRF token changed the run")

	// With the token but from another origin: 403 too.
	post := func(origin, csrf, key string) *http.Response {
		form := url.Values{"csrf": {csrf}, "key": {key}}
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/ui/runs/"+failed.String()+"/retry", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	require.Equal(t, http.StatusForbidden, post("http://evil.example", csrf, key).StatusCode)
	r, err = store.GetRun(context.Background(), b.pool, failed, false)
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempt, "a cross-origin POST retried the run")

	// Retry from the DLQ: the browser lands on the run page, on attempt 2,
	// which fails again (the endpoint fails twice).
	br.submit(row+" button.retry", "#run-attempt")
	require.Equal(t, b.srv.URL+"/ui/runs/"+failed.String(), br.location())
	require.Equal(t, "2", br.text("#run-attempt"))
	b.waitRun(t, failed, store.RunFailed, 2)

	// The same form submitted again is the same command: replayed, no retry.
	res = post("", csrf, key)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	r, err = store.GetRun(context.Background(), b.pool, failed, false)
	require.NoError(t, err)
	require.Equal(t, store.RunFailed, r.Status, "a double submit retried the run twice")
	require.Equal(t, 2, r.Attempt)

	// A fresh form (the run page's Retry) is a new command: attempt 3 completes.
	br.open(b.srv.URL+"/ui/runs/"+failed.String(), "#retry")
	br.submit("#retry", "#run-attempt")
	require.Equal(t, "3", br.text("#run-attempt"))
	b.waitRun(t, failed, store.RunCompleted, 3)
	br.open(b.srv.URL+"/ui/runs/"+failed.String(), `tr[data-step="push"]`)
	require.Equal(t, "completed", br.text("#run-status"))
	require.Equal(t, "3", br.text(`tr[data-step="push"] td.attempt`))

	// Pause and resume from the workflows page.
	wfRow := `tr[data-workflow="price-alert"]`
	br.open(b.srv.URL+"/ui/workflows", wfRow)
	br.submit(wfRow+" button", wfRow+" .status.paused")
	wf, err := store.GetWorkflow(context.Background(), b.pool, "price-alert")
	require.NoError(t, err)
	require.True(t, wf.Paused)
	br.submit(wfRow+" button", wfRow+" .status.running")
	wf, err = store.GetWorkflow(context.Background(), b.pool, "price-alert")
	require.NoError(t, err)
	require.False(t, wf.Paused)

	// Logging out ends the session server-side: the old cookie is refused.
	br.submit(".logout button", "#token")
	require.Equal(t, http.StatusForbidden, post("", csrf, uuid.NewString()).StatusCode)
}
