package server

import (
	"bytes"
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
	// HeaderIdempotencyKey is required on every mutation. A key that parses
	// as a UUID is one key in every spelling (case, braces, no dashes,
	// urn:uuid:); any other key is compared byte for byte.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotencyClass is "client" (the default: a caller's own
	// command, replayable for Config.ClientTTL) or "automatic" (a
	// deterministic command from automation that may be redelivered for
	// days, replayable for Config.AutoTTL). Cancellation is deterministic
	// whatever the header says.
	HeaderIdempotencyClass = "Idempotency-Class"
	// HeaderReplayed is "true" on a response replayed from the ledger.
	HeaderReplayed = "Idempotent-Replayed"
)

// commandScope is the ledger key space of the /v1 command API. Approval
// commands join it unchanged: a key names one request across all of /v1.
// Each project on a database has its own (Server.scope).
const commandScope = "v1"

// scope is the project's command key space: "v1" for the home project,
// "<project>.v1" for another, so two projects' clients never collide on
// a key.
func (s *Server) scope() string { return s.ns.Qualify(commandScope) }

const maxKeyLen = 255

// retention is a command's ledger class.
type retention int

const (
	// clientRetention: a caller's command, kept Config.ClientTTL unless the
	// request says Idempotency-Class: automatic.
	clientRetention retention = iota
	// deterministicRetention: a command whose repeats are expected for days
	// (cancellation), always kept Config.AutoTTL.
	deterministicRetention
)

// commandRequest is what a mutation knows of its request.
type commandRequest struct {
	// Key is the canonical Idempotency-Key (store.CanonicalIdempotencyKey).
	Key string
	// Hash identifies the request (method, path, and the body as canonical
	// JSON, see requestHash): the domain record of a command keeps it so a
	// replay after the ledger expired can tell the same request from a key
	// reused for another.
	Hash string
	// LegacyHash is the hash of the exact body, which records written
	// before bodies were canonicalised hold.
	LegacyHash string
	Body       []byte
}

// same reports whether a recorded hash is this request's.
func (c commandRequest) same(recorded string) bool {
	return recorded == c.Hash || recorded == c.LegacyHash
}

// mutation performs a command's state change inside tx and returns the
// success status and response value. An error rolls everything back,
// ledger row included, so the key stays free for a retry.
type mutation func(ctx context.Context, tx pgx.Tx, req commandRequest) (int, any, error)

// command runs one mutation under the idempotency ledger:
//
//   - no Idempotency-Key: 400, nothing happens;
//   - the key is live with the same request: the recorded response, byte for
//     byte, with Idempotent-Replayed: true;
//   - the key is live with a different request: 409;
//   - otherwise the ledger row, the mutation (and any River job it enqueues)
//     and the recorded response commit in one transaction. Concurrent
//     requests with the key wait on the ledger row and then replay it.
//
// After the row expires, each mutation answers a replay from its own domain
// rows (the run of a manual-run key, the deploy record, the cancelled run),
// so an exact replay still finds what it made and a changed request still
// conflicts.
func (s *Server) command(w http.ResponseWriter, r *http.Request, class retention, do mutation) {
	ctx := r.Context()
	raw := r.Header.Get(HeaderIdempotencyKey)
	if raw == "" {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "missing_idempotency_key",
			message: "this request changes state and needs an Idempotency-Key header (a fresh random value per " +
				"intended change; resend the same value when retrying)"})
		return
	}
	if len(raw) > maxKeyLen {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_idempotency_key",
			message: fmt.Sprintf("Idempotency-Key is %d bytes long; the limit is %d", len(raw), maxKeyLen)})
		return
	}
	key := store.CanonicalIdempotencyKey(raw)
	ttl := s.clientTTL
	switch h := r.Header.Get(HeaderIdempotencyClass); h {
	case "", "client":
	case "automatic":
		ttl = s.autoTTL
	default:
		writeError(w, &apiError{status: http.StatusBadRequest, code: "bad_idempotency_class",
			message: fmt.Sprintf("Idempotency-Class %q is not client or automatic", h)})
		return
	}
	if class == deterministicRetention {
		ttl = s.autoTTL
	}
	body, aerr := s.readBody(w, r)
	if aerr == nil {
		aerr = checkInput(r, body)
	}
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

	req := commandRequest{Key: key, Hash: requestHash(r, body), LegacyHash: exactRequestHash(r, body), Body: body}
	entry, owned, err := store.ClaimIdempotencyKey(ctx, tx, store.LedgerClaim{
		Scope: s.scope(), Key: key, Spelling: raw, RequestHash: req.Hash, LegacyHash: req.LegacyHash, TTL: ttl,
	})
	if errors.Is(err, store.ErrKeyReused) {
		msg := fmt.Sprintf("Idempotency-Key %q was already used for a different request (method, path or body); "+
			"use a new key for a new request", raw)
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

	status, v, err := do(ctx, tx, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := json.Marshal(v)
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	if err := store.CompleteIdempotencyKey(ctx, tx, s.scope(), key, status, resp); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := tx.Commit(ctx); err != nil {
		s.fail(w, r, fmt.Errorf("commit: %w", err))
		return
	}
	writeRaw(w, status, resp)
}

// requestHash identifies a command request: method, path and body. A JSON
// body counts as its canonical form (object keys sorted, no insignificant
// space, strings with one escaping, numbers as written), so a client that
// re-serialises the same request with another key order or spacing gets
// the recorded response, not a 409. A body that is not JSON (a YAML
// definition) counts byte for byte.
func requestHash(r *http.Request, body []byte) string {
	if c, ok := canonicalJSON(body); ok {
		body = c
	}
	return exactRequestHash(r, body)
}

// exactRequestHash is the hash of method, path and exact body.
func exactRequestHash(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.EscapedPath())
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes a JSON body canonically; ok false when it is not
// one JSON value. Numbers stay json.Number, so no precision is lost (42 and
// 42.0 stay two requests: they may mean different things to the command).
func canonicalJSON(body []byte) ([]byte, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	c, err := json.Marshal(v)
	return c, err == nil
}

// fail answers with err: an *apiError as is, a missing row as 404, anything
// else as a logged 500 that names no internals.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var conflict *store.TriggerKeyConflict
	var retired *store.RetiredError
	var pruned *store.PrunedError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &pruned):
		ae = &apiError{status: http.StatusConflict, code: "run_pruned", message: pruned.Error(),
			details: map[string]any{"run_id": pruned.RunID, "key": pruned.Key, "pruned_at": pruned.PrunedAt}}
	case errors.As(err, &retired):
		local := *retired
		local.Workflow, _ = s.ns.Local(retired.Workflow) // the name the caller used
		ae = &apiError{status: http.StatusGone, code: "workflow_retired", message: local.Error()}
	case errors.As(err, &conflict):
		ae = &apiError{status: http.StatusConflict, code: "run_key_reused", message: conflict.Error(),
			details: map[string]any{"run_id": conflict.RunID, "key": conflict.Key}}
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
