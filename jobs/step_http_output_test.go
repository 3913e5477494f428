package jobs_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// answering is an endpoint that answers each path with fixed bytes and
// counts the calls.
type answering struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

type answer struct {
	contentType string
	header      map[string]string
	body        string
}

func newAnswering(t *testing.T, answers map[string]answer) *answering {
	a := &answering{calls: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.calls[r.URL.Path]++
		a.mu.Unlock()
		ans := answers[r.URL.Path]
		w.Header().Set("Content-Type", ans.contentType)
		for k, v := range ans.header {
			w.Header()[k] = []string{v}
		}
		_, _ = w.Write([]byte(ans.body))
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *answering) count(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[path]
}

// Whatever an endpoint answers is journaled, exactly: what Postgres cannot
// store (a NUL, bytes that are not UTF-8, nesting past the input bound) is
// kept as base64 and listed in the output's "base64" field, and the call is
// made once.
func TestHTTPOutputStoresAnyAnswer(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	answers := map[string]answer{
		"/nul":   {contentType: "application/json", body: `{"a":"x\u0000y"}`},
		"/bytes": {contentType: "text/plain", header: map[string]string{"X-Raw": "caf\xe9"}, body: "\xff\x00abc"},
		"/deep":  {contentType: "application/json", body: deep},
		"/plain": {contentType: "application/json", body: `{"ok": true}`},
	}
	srv := newAnswering(t, answers)
	b := setup(t, strings.ReplaceAll(`
name: answers
workflows:
  - name: answers
    trigger: { manual: {} }
    steps:
      - id: nul
        http_call: { url: "SRV/nul" }
      - id: bytes
        http_call: { url: "SRV/bytes" }
      - id: deep
        http_call: { url: "SRV/deep" }
      - id: plain
        http_call: { url: "SRV/plain?seen=${{ steps.nul.output.base64[0] }}" }
`, "SRV", srv.URL))
	id := b.manual(t, "answers", "k1", nil)
	run := b.waitRun(t, id)
	require.Equal(t, store.RunCompleted, run.Status, "run error: %v", run.Error)
	steps := b.steps(t, id)
	for _, path := range []string{"/nul", "/bytes", "/deep", "/plain"} {
		require.Equal(t, 1, srv.count(path), "calls to %s", path)
	}
	output := func(key string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(steps[key].Output, &m), "step %s", key)
		return m
	}
	raw := func(v any) string {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		require.NoError(t, err)
		return string(b)
	}
	nul := output("nul")
	require.Equal(t, []any{"body"}, nul["base64"])
	require.Equal(t, answers["/nul"].body, raw(nul["body"]))

	bytes := output("bytes")
	require.ElementsMatch(t, []any{"body", "headers.X-Raw"}, bytes["base64"])
	require.Equal(t, answers["/bytes"].body, raw(bytes["body"]))
	require.Equal(t, "caf\xe9", raw(bytes["headers"].(map[string]any)["X-Raw"]))

	d := output("deep")
	require.Equal(t, deep, raw(d["body"]))

	plain := output("plain")
	require.NotContains(t, plain, "base64")
	require.Equal(t, map[string]any{"ok": true}, plain["body"])
}

// A settle that fails after the effect is a failed attempt, counted
// against the step's retry policy: the endpoint is called max_attempts
// times, never again by River's job retries, and the run fails visibly.
func TestSettleFailureCountsAsAttempt(t *testing.T) {
	t.Parallel()
	srv := newAnswering(t, map[string]answer{"/poison": {contentType: "application/json", body: `{"poison": true}`}})
	b := setup(t, strings.ReplaceAll(`
name: settle
workflows:
  - name: settle
    trigger: { manual: {} }
    steps:
      - id: call
        http_call: { url: "SRV/poison", retry: { max_attempts: 2, backoff: fixed, delay: 50ms } }
`, "SRV", srv.URL))
	// Postgres refuses to store this output, as it refused \u0000 (SQLSTATE
	// 22P05) before such answers were encoded.
	_, err := b.pool.Exec(context.Background(), `
CREATE FUNCTION public.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.output::text LIKE '%poison%' THEN RAISE EXCEPTION 'test trigger refuses this output'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON rflow.step_runs
  FOR EACH ROW EXECUTE FUNCTION public.refuse_poison();`)
	require.NoError(t, err)

	id := b.manual(t, "settle", "k1", nil)
	run := b.waitRun(t, id)
	require.Equal(t, store.RunFailed, run.Status)
	step := b.steps(t, id)["call"]
	require.Equal(t, store.StepFailed, step.Status)
	require.Equal(t, 2, step.Attempt)
	require.NotNil(t, step.Error)
	require.Contains(t, *step.Error, "could not be stored")
	require.Contains(t, *step.Error, "test trigger refuses this output")
	time.Sleep(3 * time.Second) // River would have retried the job by now
	require.Equal(t, 2, srv.count("/poison"))
}
