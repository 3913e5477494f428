package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

const parkedProject = `name: consolecancel
workflows:
  - name: parked
    trigger: { manual: {} }
    steps:
      - { id: wait_a_while, delay: 1h }
      - id: after
        http_call: { url: "http://127.0.0.1:9/never" }
`

// TestConsoleCancelAndPauseWithReasons: the run page cancels a run that
// is under way with the reason typed beside the button (kept as the run's
// cancel_reason and shown on the page), a finished run offers no cancel,
// a reason over the limit is refused with the API's message and cancels
// nothing, and the workflows page pauses with a reason that the list and
// `workflows ls -o json`'s paused_reason show.
func TestConsoleCancelAndPauseWithReasons(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(parkedProject), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	b := serve(t, p)
	br := browser(t)
	ctx := context.Background()

	id := b.startRun(t, "parked")
	b.waitRun(t, id, store.RunWaitingDelay, 1)
	br.login(b.srv.URL, testToken, "table.runs")

	// Too long a reason: the API's refusal, nothing cancelled.
	br.open(b.srv.URL+"/ui/runs/"+id.String(), "#cancel")
	csrf := run(br, chromedp.AttributeValue(chromedp.CSS(`form.cancel input[name=csrf]`), "value")).Value
	code := br.fetchStatus("/ui/runs/"+id.String()+"/cancel", fmt.Sprintf(
		`{method: 'POST', body: new URLSearchParams({csrf: %q, key: %q, reason: %q})}`, csrf, uuid.NewString(), strings.Repeat("x", 1001)))
	require.Equal(t, http.StatusBadRequest, code)
	r, err := store.GetRun(ctx, b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingDelay, r.Status, "a refused cancel cancelled the run")

	br.do(chromedp.SendKeys(chromedp.CSS("#cancel-reason"), "wrong recipient"))
	br.submit("#cancel", "#run-cancel-reason")
	require.Equal(t, b.srv.URL+"/ui/runs/"+id.String(), br.location())
	require.Equal(t, "cancelled", br.text("#run-status"))
	require.Equal(t, "wrong recipient", br.text("#run-cancel-reason"))
	r, err = store.GetRun(ctx, b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, store.RunCancelled, r.Status)
	require.NotNil(t, r.CancelReason)
	require.Equal(t, "wrong recipient", *r.CancelReason)
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('#cancel').length`)),
		"a cancelled run offers no cancel")

	// Pause with a reason from the workflows page; resume clears it.
	row := `tr[data-workflow="parked"]`
	br.open(b.srv.URL+"/ui/workflows", row)
	br.do(chromedp.SendKeys(chromedp.CSS(row+" input[name=reason]"), "vendor API down"))
	br.submit(row+" button", row+" .status.paused")
	require.Equal(t, "vendor API down", br.text(row+" .paused-reason"))
	wf, err := store.GetWorkflow(ctx, b.pool, "parked")
	require.NoError(t, err)
	require.True(t, wf.Paused)
	require.Equal(t, "vendor API down", wf.PausedReason)
	require.Zero(t, run(br, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-workflow="parked"] input[name=reason]').length`)),
		"a paused workflow's row offers Resume, with no reason field")
	br.submit(row+" button", row+" .status.running")
	wf, err = store.GetWorkflow(ctx, b.pool, "parked")
	require.NoError(t, err)
	require.False(t, wf.Paused)
}
