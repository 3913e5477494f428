package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// TestWebhookTestDelivery: POST /v1/workflows/{name}/runs with "body"
// starts a webhook workflow's run as if the hook had received the body
// (unsigned: the operate token is the credential), once per
// Idempotency-Key; "input" for a webhook workflow, or "body" for a manual
// one, is refused and starts nothing.
func TestWebhookTestDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{"body": {"order": 7}}`)
	r := b.api(t, http.MethodPost, "/v1/workflows/keyed/runs", "delivery-1", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	id := uuid.MustParse(r.json(t)["run_id"].(string))
	run, err := store.GetRun(context.Background(), b.pool, id, false)
	require.NoError(t, err)
	require.Equal(t, trigger.Webhook, run.TriggerKind)
	var payload trigger.WebhookPayload
	require.NoError(t, json.Unmarshal(run.Trigger, &payload))
	require.JSONEq(t, `{"order": 7}`, string(payload.Body))
	require.Empty(t, payload.Headers)

	// The same key again is the same command: one run.
	r = b.api(t, http.MethodPost, "/v1/workflows/keyed/runs", "delivery-1", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, id.String(), r.json(t)["run_id"])
	require.Equal(t, 1, b.runs(t))

	r = b.api(t, http.MethodPost, "/v1/workflows/keyed/runs", "delivery-2", []byte(`{"input": 1, "body": {}}`))
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "delivery-3", []byte(`{"body": {}}`))
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], `"input"`)
	r = b.api(t, http.MethodPost, "/v1/workflows/keyed/runs", "delivery-4", nil)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], `{"body": …}`)
	require.Equal(t, 1, b.runs(t))
}
