package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/signature"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

const maxWebhookKeyLen = 512

// Headers never stored in a run's trigger payload: they may carry
// credentials, and the payload is journaled in Postgres.
var droppedHeaders = map[string]bool{"authorization": true, "cookie": true, "proxy-authorization": true}

// webhookResponse answers POST /hooks/{workflow}.
type webhookResponse struct {
	RunID    uuid.UUID `json:"run_id"`
	Workflow string    `json:"workflow"`
	// Duplicate is true when the idempotency key already had a run in its
	// TTL window: nothing was created and RunID is the original run.
	Duplicate bool `json:"duplicate"`
	// AtLeastOnce is true when the trigger declares no idempotency_key:
	// every accepted POST is a new run, so a retried POST runs again.
	AtLeastOnce bool `json:"at_least_once,omitempty"`
}

// webhook claims a run for one signed POST. Checks run cheapest first and
// nothing is stored unless every one passes: known webhook workflow (404),
// body size (413), signature (401), storable headers and body (400), JSON
// (400), idempotency key (400).
//
// With an idempotency_key, the key's ledger entry (scope "webhook:<name>",
// lasting the trigger's ttl) and the run commit in one transaction, so
// concurrent duplicates wait for the first and then answer with its run. The
// run's trigger key is the idempotency key plus the start of its TTL window
// ("<key>@<RFC 3339 time>"): a repeat after the window is a new occurrence.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("workflow")
	wf, err := s.engine.Workflow(ctx, s.ns.Qualify(name))
	if errors.Is(err, store.ErrNotFound) || (err == nil && wf.Trigger.Webhook == nil) {
		writeError(w, &apiError{status: http.StatusNotFound, code: "not_found",
			message: fmt.Sprintf("no workflow %q with a webhook trigger is deployed", name)})
		return
	}
	if err != nil {
		s.fail(w, r, fmt.Errorf("webhook %s: %w", name, err))
		return
	}
	hook := wf.Trigger.Webhook
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if hook.Secret.IsSet() {
		// v2 covers the method and path (a request signed for another
		// webhook sharing the secret is refused) and the headers the
		// idempotency key reads (validate insists on it).
		scheme, err := signature.VerifyRequest(hook.Secret.Reveal(), r, body, time.Now(), signature.VerifyOptions{
			RequireHeaders: hook.SignedHeaders, AllowV1: hook.LegacySignatures})
		if err != nil {
			writeError(w, &apiError{status: http.StatusUnauthorized, code: "bad_signature", message: err.Error()})
			return
		}
		if scheme == signature.SchemeV1 {
			s.logger.WarnContext(ctx, "webhook accepted with a deprecated v1 signature (timestamp and body only); "+
				"move the sender to v2 and remove legacy_signatures", "workflow", name)
		}
	}
	if aerr := checkInput(r, body); aerr != nil {
		writeError(w, aerr)
		return
	}
	decoded, err := workflow.UnmarshalJSON(body)
	if err != nil {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "malformed_json",
			message: "the webhook body must be one JSON value: " + err.Error()})
		return
	}
	headers := make(map[string]any, len(r.Header))
	stored := make(map[string]string, len(r.Header))
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		v := strings.Join(vs, ", ")
		headers[lk] = v
		if !droppedHeaders[lk] {
			stored[lk] = v
		}
	}
	payload, err := json.Marshal(trigger.WebhookPayload{Headers: stored, Body: body})
	if err != nil {
		s.fail(w, r, fmt.Errorf("webhook %s: encode payload: %w", name, err))
		return
	}
	claim := store.Claim{Workflow: s.ns.Qualify(name), TriggerKind: trigger.Webhook, Trigger: payload}

	if hook.IdempotencyKey == nil {
		claim.TriggerKey = uuid.NewString()
		s.startWebhookRun(w, r, claim, "", 0)
		return
	}
	v, err := hook.IdempotencyKey.Eval(workflow.Env{"headers": headers, "body": decoded})
	if err != nil {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_idempotency_key",
			message: "the trigger's idempotency_key could not be computed from this request: " + err.Error()})
		return
	}
	key, ok := keyString(v)
	if len(key) > maxWebhookKeyLen {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_idempotency_key",
			message: fmt.Sprintf("the idempotency key is %d bytes long; the limit is %d", len(key), maxWebhookKeyLen)})
		return
	}
	if !ok {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "missing_idempotency_key",
			message: fmt.Sprintf("the trigger's idempotency_key %s is empty for this request; send the "+
				"header or body field it reads", hook.IdempotencyKey)})
		return
	}
	ttl := hook.TTL
	if ttl <= 0 {
		ttl = workflow.DefaultWebhookTTL
	}
	s.startWebhookRun(w, r, claim, key, ttl)
}

// startWebhookRun claims the run in one transaction, under the ledger entry
// of key when there is one.
func (s *Server) startWebhookRun(w http.ResponseWriter, r *http.Request, c store.Claim, key string, ttl time.Duration) {
	ctx := r.Context()
	tx, release, err := s.begin(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer release()
	scope := "webhook:" + c.Workflow
	if key != "" {
		// Any request with the key is the same occurrence, whatever its
		// body: the request hash is the key itself.
		entry, owned, err := store.ClaimIdempotencyKey(ctx, tx, store.LedgerClaim{
			Scope: scope, Key: key, RequestHash: hashString(key), TTL: ttl,
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !owned {
			var first webhookResponse
			if err := json.Unmarshal(entry.Response, &first); err != nil {
				s.fail(w, r, fmt.Errorf("webhook %s: recorded response of key %s: %w", c.Workflow, key, err))
				return
			}
			first.Duplicate = true
			writeJSON(w, http.StatusOK, first)
			return
		}
		c.TriggerKey = key + "@" + entry.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	id, created, err := s.engine.StartRunTx(ctx, tx, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	local, _ := s.ns.Local(c.Workflow)
	resp := webhookResponse{RunID: id, Workflow: local, Duplicate: !created, AtLeastOnce: key == ""}
	b, err := json.Marshal(resp)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	if key != "" {
		if err := store.CompleteIdempotencyKey(ctx, tx, scope, key, status, b); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := tx.Commit(ctx); err != nil {
		s.fail(w, r, fmt.Errorf("commit: %w", err))
		return
	}
	writeRaw(w, status, b)
}

// keyString renders an evaluated idempotency key; nil and "" mean none.
func keyString(v any) (string, bool) {
	var s string
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		s = v
	case *big.Int:
		s = v.String()
	case int64:
		s = strconv.FormatInt(v, 10)
	case int:
		s = strconv.Itoa(v)
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		s = strconv.FormatBool(v)
	default:
		b, err := workflow.MarshalJSON(v)
		if err != nil {
			return "", false
		}
		s = string(b)
	}
	return s, s != ""
}

func hashString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
