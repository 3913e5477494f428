package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// liveProject has a manual workflow whose first call blocks until the test
// releases it (the run is running meanwhile), a manual workflow for the
// run-it form and a signed webhook workflow for its test delivery.
const liveProject = `name: consolelive
workflows:
  - name: held
    trigger: { manual: {} }
    steps:
      - id: warm
        http_call: { url: "%[1]s/ok" }
      - id: hold
        http_call: { url: "%[1]s/hold" }
      - id: tell
        notify: { webhook: "%[1]s/ok", text: "released" }
  - name: once
    trigger: { manual: {} }
    steps:
      - { id: only, delay: 1ms }
  - name: hook
    trigger:
      webhook:
        secret: literal-hook-secret
        idempotency_key: "${{ body.id }}"
    steps:
      - { id: take, delay: 1ms }
`

// liveBundle serves liveProject with River UI, its /hold endpoint
// answering once release is closed.
func liveBundle(t *testing.T) (*bundle, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(ep.Close)
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(liveProject, ep.URL)), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	return serve(t, p, withRiverUI), release
}

// waitText waits until sel's text is want, reading the page in place.
func (b *tab) waitText(sel, want string) {
	b.t.Helper()
	var got string
	ok := assertEventually(func() bool {
		ctx, cancel := b.timeout()
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel)))
		got = strings.TrimSpace(v)
		return err == nil && got == want
	})
	require.True(b.t, ok, "%s never read %q (last %q)", sel, want, got)
}

func assertEventually(cond func() bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// markPage marks the loaded document; stillSamePage says no navigation or
// reload replaced it since.
func (b *tab) markPage() { b.do(chromedp.Evaluate[chromedp.Void](`window.rflowSamePage = true`)) }

func (b *tab) stillSamePage() bool {
	return run(b, chromedp.Evaluate[bool](`window.rflowSamePage === true`))
}

// noOverflow fails when the page is wider than the 1280px window.
func (b *tab) noOverflow(what string) {
	b.t.Helper()
	w := run(b, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`))
	require.LessOrEqual(b.t, w[0], w[1], "%s overflows the window horizontally (%d px wide in %d)", what, w[0], w[1])
}

// TestConsoleLiveInBrowser: pages open in a real Chromium update without
// a reload: a run's page goes from running to completed, the runs list
// shows a new run; the timeline has one bar per journaled step, each step
// links to its River job; a session that ends stops the updates. A
// workflow's page shows its definition and its run-it form starts one run
// per idempotency key however often it is submitted, for a manual
// workflow and as a webhook's test delivery. No page is wider than the
// window.
func TestConsoleLiveInBrowser(t *testing.T) {
	t.Parallel()
	b, release := liveBundle(t)
	br := browser(t)
	ctx := context.Background()

	id := b.startRun(t, "held")
	b.waitRun(t, id, store.RunRunning, 1)
	br.login(b.srv.URL, testToken, "table.runs")
	br.open(b.srv.URL+"/ui/runs/"+id.String(), "#timeline")
	require.Equal(t, "running", br.text("#run-status"))
	br.noOverflow("the run page")
	br.markPage()

	close(release)
	br.waitText("#run-status", "completed")
	require.True(t, br.stillSamePage(), "the run page updated by reloading")
	b.waitRun(t, id, store.RunCompleted, 1)
	br.waitText(`tr.step[data-step="tell"] .status`, "completed")

	// One bar per journaled step, in journal order.
	bars := run(br, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline .tl-row')].filter(r => r.querySelector('rect.bar')).map(r => r.dataset.step)`))
	steps := run(br, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr.step')].map(r => r.dataset.step)`))
	require.Equal(t, []string{"warm", "hold", "tell"}, steps)
	require.Equal(t, steps, bars)
	require.Equal(t, 3, run(br, chromedp.Evaluate[int](`document.querySelectorAll('#timeline rect.bar').length`)))
	require.True(t, br.stillSamePage())

	// Each step links to its own River job in River UI, or to the job that
	// carried it inline after its own step (jobs/step_carry.go).
	links := run(br, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr.step')].map(r => (r.querySelector('a.riverjob') || {}).getAttribute?.call(r.querySelector('a.riverjob'), 'href') || '')`))
	jobPath := regexp.MustCompile(`^/riverui/jobs/(\d+)$`)
	for i, href := range links {
		m := jobPath.FindStringSubmatch(href)
		require.NotNil(t, m, "step %s links to River UI's job page: %q", steps[i], href)
		var args string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT args::text FROM river.river_job WHERE id = $1`, m[1]).Scan(&args))
		require.Contains(t, args, id.String(), "job %s is this run's", m[1])
		var carrier *int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT carrier_job FROM rflow.step_runs WHERE run_id = $1 AND step_key = $2`,
			id, steps[i]).Scan(&carrier))
		if carrier != nil {
			require.Equal(t, fmt.Sprint(*carrier), m[1], "step %s links its carrier", steps[i])
			continue
		}
		require.Contains(t, args, steps[i], "job %s is step %s's", m[1], steps[i])
	}

	// The link opens that job's page in River UI, on the session.
	br.do(chromedp.Navigate(b.srv.URL + links[0]))
	require.Eventually(t, func() bool {
		ctx, cancel := br.timeout()
		defer cancel()
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		return err == nil && strings.Contains(text, "rflow.step") && strings.Contains(text, id.String())
	}, 30*time.Second, 100*time.Millisecond, "River UI shows the step's job")

	// The runs list shows a run started after it was opened.
	br.open(b.srv.URL+"/ui/", "table.runs")
	br.markPage()
	later := b.startRun(t, "once")
	br.waitVisible(fmt.Sprintf(`tr[data-run="%s"]`, later))
	require.True(t, br.stillSamePage(), "the runs list updated by reloading")
	br.noOverflow("the runs list")

	// The workflow page: its definition as deployed, secrets hidden.
	br.open(b.srv.URL+"/ui/workflows/hook", "#definition")
	def := br.text("#definition")
	require.Contains(t, def, "name: hook")
	require.Contains(t, def, "idempotency_key: ${{ body.id }}")
	require.NotContains(t, def, "literal-hook-secret")
	br.noOverflow("a workflow page")

	// A webhook workflow's test delivery lands on its run.
	br.do(chromedp.SetValue(chromedp.CSS("#run-data"), `{"id": "evt-1", "amount": 7}`))
	br.submit("#run-submit", "#run-status")
	hookRun := runOnPage(t, br)
	r, err := store.GetRun(ctx, b.pool, hookRun, false)
	require.NoError(t, err)
	require.Equal(t, "hook", r.Workflow)
	require.Equal(t, trigger.Webhook, r.TriggerKind)
	require.Contains(t, string(r.Trigger), `"amount": 7`)

	// The run-it form of a manual workflow, submitted twice in a row
	// (a double click) and then once more with the same key: one run.
	runsOf := func(wf string) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = $1`, wf).Scan(&n))
		return n
	}
	before := runsOf("once")
	br.open(b.srv.URL+"/ui/workflows/once", "#run-form")
	key := run(br, chromedp.AttributeValue(chromedp.CSS("#run-key"), "value")).Value
	_, err = uuid.Parse(key)
	require.NoError(t, err, "the key field is pre-filled with a fresh key")
	br.do(chromedp.SetValue(chromedp.CSS("#run-data"), `{"n": 1}`))
	br.do(chromedp.Evaluate[chromedp.Void](`window.rflowOldPage = true; const f = document.querySelector('#run-form'); f.requestSubmit(); f.requestSubmit()`))
	require.Eventually(t, func() bool {
		ok, err := chromedp.Run(br.ctx, chromedp.Evaluate[bool](`!window.rflowOldPage && document.readyState === 'complete' && !!document.querySelector('#run-status')`))
		return err == nil && ok
	}, 20*time.Second, 20*time.Millisecond, "the run-it form led to no run page")
	first := runOnPage(t, br)
	br.open(b.srv.URL+"/ui/workflows/once", "#run-form")
	br.do(chromedp.SetValue(chromedp.CSS("#run-key"), key), chromedp.SetValue(chromedp.CSS("#run-data"), `{"n": 1}`))
	br.submit("#run-submit", "#run-status")
	require.Equal(t, first, runOnPage(t, br), "the same key lands on the same run")
	require.Equal(t, before+1, runsOf("once"), "one run for one key")

	// Without JavaScript the form works as it is (and nothing polls).
	_, err = chromedp.Call(br.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
	require.NoError(t, err)
	br.open(b.srv.URL+"/ui/workflows/once", "#run-form")
	require.Empty(t, run(br, chromedp.Evaluate[string](`document.documentElement.dataset.live || ''`)), "console.js did not run")
	br.submit("#run-submit", "#run-status")
	require.NotEqual(t, first, runOnPage(t, br), "a fresh key is a new run")
	require.Equal(t, before+2, runsOf("once"))
	_, err = chromedp.Call(br.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
	require.NoError(t, err)

	// A session that ends stops the updates, and says so.
	br.open(b.srv.URL+"/ui/runs/"+id.String(), "#run-status")
	csrf := run(br, chromedp.AttributeValue(chromedp.CSS(`.logout input[name=csrf]`), "value")).Value
	require.Equal(t, http.StatusOK, br.fetchStatus("/ui/logout", fmt.Sprintf(`{method: 'POST', body: new URLSearchParams({csrf: %q})}`, csrf)))
	br.waitVisible("#live")
	require.Contains(t, br.text("#live"), "Live updates stopped")
	require.Equal(t, "stopped", run(br, chromedp.Evaluate[string](`document.documentElement.dataset.live`)))
}

// runOnPage is the run whose page the tab shows.
func runOnPage(t *testing.T, br *tab) uuid.UUID {
	t.Helper()
	loc := br.location()
	i := strings.LastIndex(loc, "/ui/runs/")
	require.GreaterOrEqual(t, i, 0, "not a run page: %s", loc)
	id, err := uuid.Parse(loc[i+len("/ui/runs/"):])
	require.NoError(t, err)
	return id
}
