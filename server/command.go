package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// Headers of the command protocol.
const (
	// HeaderIdempotencyKey is required on every mutation.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotencyClass is "client" (the default: a caller's own
	// command, replayable for Config.ClientTTL) or "automatic" (a
	// deterministic command from automation that may be redelivered for
	// days, replayable for Config.AutoTTL).
	HeaderIdempotencyClass = "Idempotency-Class"
	// HeaderReplayed is "true" on a response replayed from the ledger.
	HeaderReplayed = "Idempotent-Replayed"
)

// commandScope is the ledger key space of the /v1 command API. Approval
// commands join it unchanged: a key names one request across all of /v1.
const commandScope = "v1"

const maxKeyLen = 255

// mutation performs a command's state change inside tx and returns the
// success status and response value. An error rolls everything back,
// ledger row included, so the key stays free for a retry.
type mutation func(ctx context.Context, tx pgx.Tx, body []byte) (int, any, error)

// command runs one mutation under the idempotency ledger:
//
//   - no Idempotency-Key: 400, nothing happens;
//   - the key is live with the same request: the recorded response, byte for
//     byte, with Idempotent-Replayed: true;
//   - the key is live with a different request: 409;
//   - otherwise the ledger row, the mutation (and any River job it enqueues)
//     and the recorded response commit in one transaction. Concurrent
//     requests with the key wait on the ledger row and then replay it.
func (s *Server) command(w http.ResponseWriter, r *http.Request, do mutation) {
	ctx := r.Context()
	key := r.Header.Get(HeaderIdempotencyKey)
	if key == "" {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "missing_idempotency_key",
			message: "this request changes state and needs an Idempotency-Key header (a fresh random value per " +
				"intended change; resend the same value when retrying)"})
		return
	}
	if len(key) > maxKeyLen {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_idempotency_key",
			message: fmt.Sprintf("Idempotency-Key is %d bytes long; the limit is %d", len(key), maxKeyLen)})
		return
	}
	ttl := s.clientTTL
	switch class := r.Header.Get(HeaderIdempotencyClass); class {
	case "", "client":
	case "automatic":
		ttl = s.autoTTL
	default:
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_idempotency_class",
			message: fmt.Sprintf("Idempotency-Class %q is not client or automatic", class)})
		return
	}
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}

	tx, release, err := s.begin(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer release()

	entry, owned, err := store.ClaimIdempotencyKey(ctx, tx, store.LedgerClaim{
		Scope: commandScope, Key: key, RequestHash: requestHash(r, body), TTL: ttl,
	})
	if errors.Is(err, store.ErrKeyReused) {
		msg := fmt.Sprintf("Idempotency-Key %q was already used for a different request (method, path or body); "+
			"use a new key for a new request", key)
		if entry != nil {
			msg += fmt.Sprintf(" (the key is reserved until %s)", entry.ExpiresAt.UTC().Format(time.RFC3339))
		}
		writeError(w, &apiError{status: http.StatusConflict, code: "idempotency_key_reused", message: msg})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !owned {
		w.Header().Set(HeaderReplayed, "true")
		writeRaw(w, entry.ResponseStatus, entry.Response)
		return
	}

	status, v, err := do(ctx, tx, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := json.Marshal(v)
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	if err := store.CompleteIdempotencyKey(ctx, tx, commandScope, key, status, resp); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := tx.Commit(ctx); err != nil {
		s.fail(w, r, fmt.Errorf("commit: %w", err))
		return
	}
	writeRaw(w, status, resp)
}

// requestHash identifies a command request: method, path and exact body.
func requestHash(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.EscapedPath())
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// fail answers with err: an *apiError as is, a missing row as 404, anything
// else as a logged 500 that names no internals.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, store.ErrNotFound):
		ae = &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; the transaction rolled back.
		return
	default:
		s.logger.ErrorContext(r.Context(), "http request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = errInternal
	}
	writeError(w, ae)
}
