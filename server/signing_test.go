package server_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/signature"
)

const signingProject = `
name: signing
workflows:
  - name: keyed
    trigger:
      webhook:
        secret: ` + hookSecret + `
        signed_headers: [x-idempotency-key]
        idempotency_key: "${{ headers['x-idempotency-key'] }}"
    steps: [ { id: park, delay: 1h } ]
  - name: billing
    trigger:
      webhook: { secret: ` + hookSecret + `, idempotency_key: "${{ body.id }}" }
    steps: [ { id: park, delay: 1h } ]
  - name: shipping
    trigger:
      webhook: { secret: ` + hookSecret + `, idempotency_key: "${{ body.id }}" }
    steps: [ { id: park, delay: 1h } ]
  - name: legacy
    trigger:
      webhook: { secret: ` + hookSecret + `, idempotency_key: "${{ body.id }}", legacy_signatures: true }
    steps: [ { id: park, delay: 1h } ]
`

// A signed webhook cannot be replayed as a new run: the v2 signature
// covers the path (a request signed for one workflow is refused by another
// sharing the secret) and the header the idempotency key reads (a captured
// request re-sent with another key is refused).
func TestSignedWebhookCannotBeReplayedAsNewRun(t *testing.T) {
	t.Parallel()
	b := newBundle(t, signingProject, false)
	runs := func() int { return b.count(t, `SELECT count(*) FROM rflow.workflow_runs`) }

	body := []byte(`{"amount": 5}`)
	captured := signed("/hooks/keyed", body, map[string]string{"X-Idempotency-Key": "evt-1"})
	r := b.do(t, http.MethodPost, "/hooks/keyed", body, captured)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)

	replayed := map[string]string{}
	for k, v := range captured {
		replayed[k] = v
	}
	replayed["X-Idempotency-Key"] = "evt-2"
	r = b.do(t, http.MethodPost, "/hooks/keyed", body, replayed)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Equal(t, "bad_signature", r.errorCode(t))

	// Signed without covering the header the key reads: refused, naming it.
	bare := signedWith(hookSecret, "/hooks/keyed", body, time.Now(), nil)
	bare["X-Idempotency-Key"] = "evt-3"
	r = b.do(t, http.MethodPost, "/hooks/keyed", body, bare)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "x-idempotency-key")
	require.Equal(t, 1, runs())

	order := []byte(`{"id": "o-1"}`)
	forBilling := signed("/hooks/billing", order, nil)
	r = b.do(t, http.MethodPost, "/hooks/billing", order, forBilling)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r = b.do(t, http.MethodPost, "/hooks/shipping", order, forBilling)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Equal(t, 2, runs())

	// The v1 scheme (timestamp and body only) is refused unless the
	// trigger still accepts it with legacy_signatures.
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	v1 := map[string]string{signature.HeaderTimestamp: ts, signature.HeaderSignature: signature.Sign(hookSecret, ts, order),
		"Content-Type": "application/json"}
	r = b.do(t, http.MethodPost, "/hooks/shipping", order, v1)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "v2=")
	r = b.do(t, http.MethodPost, "/hooks/legacy", order, v1)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, 3, runs())

	// A signed hook keyed on a header it does not list in signed_headers
	// deploys: the header is signed implicitly, so a request whose
	// signature leaves it out is refused.
	def := []byte(`name: loose
trigger:
  webhook: { secret: ` + hookSecret + `, idempotency_key: "${{ headers['x-request-id'] }}" }
steps: [ { id: park, delay: 1h } ]
`)
	r = b.api(t, http.MethodPut, "/v1/workflows/loose", "deploy-loose", def)
	require.Less(t, r.status, 300, "%s", r.body)
	bare = signedWith(hookSecret, "/hooks/loose", body, time.Now(), nil)
	bare["X-Request-Id"] = "req-1"
	r = b.do(t, http.MethodPost, "/hooks/loose", body, bare)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "x-request-id")
	req := httptest.NewRequest(http.MethodPost, "/hooks/loose", nil)
	req.Header.Set("X-Request-Id", "req-1")
	signature.SignRequest(req, hookSecret, body, []string{"X-Request-Id"}, time.Now())
	covering := map[string]string{"Content-Type": "application/json"}
	for k := range req.Header {
		covering[k] = req.Header.Get(k)
	}
	r = b.do(t, http.MethodPost, "/hooks/loose", body, covering)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)

	// Reading the headers as a whole is never covered: it does not deploy.
	def = []byte(`name: looser
trigger:
  webhook: { secret: ` + hookSecret + `, idempotency_key: "${{ headers[body.h] }}" }
steps: [ { id: park, delay: 1h } ]
`)
	r = b.api(t, http.MethodPut, "/v1/workflows/looser", "deploy-looser", def)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "headers (as a whole)")
}
