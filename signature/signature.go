// Package signature is rflow's HMAC scheme for HTTP requests. Webhooks into
// rflow are verified with the v2 scheme (request.go), which covers the
// timestamp, method, path, chosen headers and body; outgoing http_call and
// notify requests are signed with v1, which covers the timestamp and body:
//
//	X-Rflow-Timestamp: <unix seconds>
//	X-Rflow-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
// A verifier accepts either while the timestamp is at most MaxAge from its
// clock, so a captured request cannot be replayed later.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the scheme.
const (
	HeaderTimestamp = "X-Rflow-Timestamp"
	HeaderSignature = "X-Rflow-Signature"
)

// MaxAge is how old (or how far in the future) a signed timestamp may be.
const MaxAge = 5 * time.Minute

const prefix = "sha256="

// Verify's errors, matched with errors.Is; the wrapped message says what
// the sender must fix.
var (
	ErrMissing   = errors.New("missing signature")
	ErrMalformed = errors.New("malformed signature")
	ErrStale     = errors.New("stale signature")
	ErrMismatch  = errors.New("wrong signature")
)

// Sign returns the X-Rflow-Signature value for body at timestamp ts (unix
// seconds as a decimal string).
func Sign(secret, ts string, body []byte) string {
	return prefix + hex.EncodeToString(mac(secret, ts, body))
}

// SetHeaders signs body at now and sets both headers on h.
func SetHeaders(h http.Header, secret string, body []byte, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, Sign(secret, ts, body))
}

// Verify checks the headers of a request with body against secret: both
// present, a timestamp within MaxAge of now, and a matching signature
// (compared in constant time).
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	ts, sig := h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if ts == "" || sig == "" {
		return fmt.Errorf("%w: send %s (unix seconds) and %s: sha256=<hex HMAC-SHA256(secret, timestamp + \".\" + body)>",
			ErrMissing, HeaderTimestamp, HeaderSignature)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s must be unix seconds", ErrMalformed, HeaderTimestamp)
	}
	if age := now.Sub(time.Unix(secs, 0)); age > MaxAge || age < -MaxAge {
		return fmt.Errorf("%w: %s is more than %s away from the receiver's clock", ErrStale, HeaderTimestamp, MaxAge)
	}
	hexMAC, ok := strings.CutPrefix(sig, prefix)
	got, err := hex.DecodeString(hexMAC)
	if !ok || err != nil {
		return fmt.Errorf("%w: %s must be sha256=<hex>", ErrMalformed, HeaderSignature)
	}
	if !hmac.Equal(got, mac(secret, ts, body)) {
		return fmt.Errorf("%w: it does not match the body under this secret", ErrMismatch)
	}
	return nil
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}
