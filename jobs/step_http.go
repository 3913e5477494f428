package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/signature"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// maxResponseBody caps how much of a response an http_call journals.
const maxResponseBody = 1 << 20

// doHTTP performs an http_call or a webhook-style notify. Every request
// carries Idempotency-Key <run_id>:<step_key> (stable across attempts of the
// step), so a receiver can drop the duplicate that the at-least-once window
// of a crash between effect and outcome can produce; after an operator's
// N-th `runs retry` it is <run_id>:<step_key>:r<N> (see idempotencyKey). A step of an on_reorg
// response (of is the run it answers) keys on the response's id, so its
// keys never collide with the run's own steps, and names the run in
// X-Rflow-Run-Id, as run.id does in its expressions.
func (e *Engine) doHTTP(ctx context.Context, run, of *store.Run, row *store.StepRun, s *workflow.Step, env workflow.Env) outcome {
	req, timeout, secret, expect, err := buildRequest(s, env)
	if err != nil {
		return outcome{err: err}
	}
	req.headers["Idempotency-Key"] = idempotencyKey(run, row.Key)
	req.headers["X-Rflow-Run-Id"] = run.ID.String()
	if of != nil {
		req.headers["X-Rflow-Run-Id"] = of.ID.String()
		req.headers["X-Rflow-Reorg-Response"] = run.ID.String()
	}
	req.headers["X-Rflow-Step"] = row.Key
	if r, ok := store.ParseRehearsal(run.Workflow); ok && r.Kind == store.RehearsalReplay {
		// The receiver can tell a rehearsal from the live workflow.
		req.headers["X-Rflow-Replay"] = r.Session
	}
	out, code, err := e.roundTrip(ctx, req, timeout, secret, expect)
	switch {
	case err != nil && code == 0:
		return outcome{err: err, retryable: retryTransport(s)}
	case err != nil:
		return outcome{output: out, err: err, retryable: retryStatus(s, code)}
	}
	return outcome{output: out}
}

// idempotencyKey is an http_call's or notify's outgoing Idempotency-Key.
// The run's own attempts (a crash's re-execution, retry: policy) share
// <run_id>:<step_key>, so the receiver drops duplicates. An operator's
// `runs retry` is a new request: the run's attempt counts the retries, and
// the N-th one keys <run_id>:<step_key>:r<N>, or an endpoint that cached
// the failure under the key (as Stripe does) would replay it forever.
func idempotencyKey(run *store.Run, stepKey string) string {
	key := run.ID.String() + ":" + stepKey
	if run.Attempt > 1 {
		key += ":r" + strconv.Itoa(run.Attempt-1)
	}
	return key
}

// roundTrip makes one request and decodes the response. A transport
// failure (no response) is an error with code 0; a response expect refuses
// is an error with its code and the decoded output. Errors never carry the
// URL's credentials.
func (e *Engine) roundTrip(ctx context.Context, req request, timeout time.Duration, secret string, expect func(int) bool) (map[string]any, int, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := req.body
	hreq, err := http.NewRequestWithContext(ctx, req.method, req.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("request: %w", redact.Error(err))
	}
	for k, v := range req.headers {
		hreq.Header.Set(k, v)
	}
	if len(body) > 0 && hreq.Header.Get("Content-Type") == "" {
		hreq.Header.Set("Content-Type", req.contentType)
	}
	hreq.Header.Set("User-Agent", "rflow")
	if secret != "" {
		signature.SetHeaders(hreq.Header, secret, body, time.Now())
	}
	resp, err := e.http.Do(hreq)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return nil, 0, fmt.Errorf("%s %s: no response within the step's timeout of %s", req.method, redact.URL(req.url), timeout)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", req.method, redact.URL(req.url), redact.Error(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: read response: %w", req.method, redact.URL(req.url), redact.Error(err))
	}
	out := responseOutput(resp.StatusCode, resp.Header, raw)
	if !expect(resp.StatusCode) {
		return out, resp.StatusCode, fmt.Errorf("%s %s: unexpected status %d%s", req.method, redact.URL(req.url), resp.StatusCode, errorBody(raw))
	}
	return out, resp.StatusCode, nil
}

type request struct {
	method, url, contentType string
	headers                  map[string]string
	body                     []byte
}

func buildRequest(s *workflow.Step, env workflow.Env) (request, time.Duration, string, func(int) bool, error) {
	r := request{method: http.MethodPost, headers: map[string]string{}, contentType: "application/json"}
	okStatus := func(code int) bool { return code >= 200 && code < 300 }
	switch {
	case s.HTTPCall != nil:
		c := s.HTTPCall
		if c.Method != "" {
			r.method = c.Method
		}
		u, err := c.URL.String(env)
		if err != nil {
			return r, 0, "", nil, err
		}
		r.url = u
		for k, v := range c.Headers {
			hv, err := v.String(env)
			if err != nil {
				return r, 0, "", nil, fmt.Errorf("header %s: %w", k, err)
			}
			r.headers[k] = hv
		}
		if c.Body != nil {
			v, text, err := c.Body.EvalRequest(env)
			if err != nil {
				return r, 0, "", nil, fmt.Errorf("body: %w", err)
			}
			if str, ok := v.(string); ok && text {
				r.body, r.contentType = []byte(str), "text/plain; charset=utf-8"
			} else if r.body, err = workflow.MarshalRequestJSON(v); err != nil {
				return r, 0, "", nil, fmt.Errorf("body: %w", err)
			}
		}
		timeout := c.Timeout
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		if len(c.ExpectStatus) > 0 {
			okStatus = func(code int) bool { return slices.Contains(c.ExpectStatus, code) }
		}
		return r, timeout, c.HMACSecret.Reveal(), okStatus, nil
	case s.Notify != nil:
		n := s.Notify
		u, err := n.URL.String(env)
		if err != nil {
			return r, 0, "", nil, err
		}
		r.url = u
		var text string
		if n.Text != nil {
			if text, err = n.Text.String(env); err != nil {
				return r, 0, "", nil, fmt.Errorf("text: %w", err)
			}
		}
		payload, chat := chatPayload(n.Format, text)
		if !chat {
			if n.Body != nil {
				if payload, _, err = n.Body.EvalRequest(env); err != nil {
					return r, 0, "", nil, fmt.Errorf("body: %w", err)
				}
			} else {
				run, _ := env["run"].(map[string]any)
				payload = map[string]any{"text": text, "run_id": run["id"], "workflow": run["workflow"]}
			}
		}
		if r.body, err = workflow.MarshalRequestJSON(payload); err != nil {
			return r, 0, "", nil, fmt.Errorf("body: %w", err)
		}
		return r, notifyTimeout, "", okStatus, nil
	}
	return r, 0, "", nil, fmt.Errorf("step %s has no request", s.ID)
}

// chatPayload is the body a Slack or Discord incoming webhook takes for
// text; ok is false for a plain webhook, whose body is the caller's.
func chatPayload(format, text string) (payload any, ok bool) {
	switch format {
	case workflow.NotifySlack:
		return map[string]any{"text": text}, true
	case workflow.NotifyDiscord:
		return map[string]any{"content": text}, true
	}
	return nil, false
}

func retryTransport(s *workflow.Step) bool {
	return s.Retry != nil && s.Retry.OnTransportError
}

func retryStatus(s *workflow.Step, code int) bool {
	return s.Retry.RetryStatus(code)
}

// maxErrorBody caps how much of a failed response's body its step's
// journaled error quotes: enough to read a receiver's error message.
const maxErrorBody = 4 << 10

// errorBody quotes a failed response's body for the step's error (the
// output of a failed step is not journaled), cut at maxErrorBody on a rune
// boundary.
func errorBody(raw []byte) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return " (empty body)"
	}
	if len(b) <= maxErrorBody {
		return ": " + printable(b)
	}
	cut := maxErrorBody
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf(": %s… (%d of %d bytes)", printable(b[:cut]), cut, len(raw))
}

// execHTTP performs an http_call or notify attempt. The fault points
// bracket the effect: the row is durable before it, the outcome not yet
// committed after it.
func (e *Engine) execHTTP(ctx context.Context, x *attempt) (outcome, error) {
	if e.rehearsal.skipsHTTP() {
		// rflow replay --skip-http: journaled, never requested.
		return outcome{output: map[string]any{"skipped": true, "reason": "rehearsal: HTTP steps recorded, not requested (--skip-http)"}}, nil
	}
	e.faults.Hit(FaultAfterJournal)
	var of *store.Run
	if x.a.origin != nil {
		of = x.a.origin.run
	}
	var env workflow.Env
	if s := x.l.n.step; s.HTTPCall == nil || !literalCall(s.HTTPCall) {
		env = x.a.env(x.l)
	}
	out := e.doHTTP(ctx, x.run, of, x.step, x.l.n.step, env)
	e.faults.Hit(FaultAfterEffect)
	return out, nil
}

// literalCall reports whether an http_call holds no expression: its request
// then needs no environment, whose building (the trigger and every visible
// step output decoded) was 40 % of the CPU such a step spent in execHTTP.
func literalCall(c *workflow.HTTPCall) bool {
	if _, ok := c.URL.Literal(); !ok {
		return false
	}
	if _, ok := c.Body.Literal(); !ok {
		return false
	}
	for _, v := range c.Headers {
		if _, ok := v.Literal(); !ok {
			return false
		}
	}
	return true
}
