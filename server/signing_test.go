package server_test

import (
	"net/http"
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

	// A definition whose signed hook keys on an unsigned header does not
	// deploy.
	def := []byte(`name: loose
trigger:
  webhook: { secret: s, idempotency_key: "${{ headers['x-request-id'] }}" }
steps: [ { id: park, delay: 1h } ]
`)
	r = b.api(t, http.MethodPut, "/v1/workflows/loose", "deploy-loose", def)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "headers['x-request-id']")
}
