package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HeaderSignedHeaders lists, comma-separated and in order, the request
// headers a v2 signature covers besides the method, path and body.
const HeaderSignedHeaders = "X-Rflow-Signed-Headers"

// Scheme is a signature scheme.
type Scheme int

const (
	// SchemeV2 (X-Rflow-Signature: v2=<hex>) signs the timestamp, method,
	// path, the headers listed in X-Rflow-Signed-Headers and the body, so a
	// request signed for one endpoint is refused by another sharing the
	// secret, and a header an idempotency key reads cannot be changed.
	SchemeV2 Scheme = iota + 1
	// SchemeV1 (X-Rflow-Signature: sha256=<hex>) signs the timestamp and
	// body only. Deprecated for webhooks into rflow; still what http_call
	// and notify send.
	SchemeV1
)

func (s Scheme) String() string {
	switch s {
	case SchemeV1:
		return "v1"
	case SchemeV2:
		return "v2"
	}
	return "unknown"
}

const prefixV2 = "v2="

// VerifyRequest's further errors, matched with errors.Is.
var (
	// ErrLegacy is a v1 signature where only v2 is accepted.
	ErrLegacy = errors.New("legacy signature")
	// ErrUnsignedHeader is a v2 signature that does not cover a header
	// the receiver requires signed.
	ErrUnsignedHeader = errors.New("unsigned header")
)

// VerifyOptions says what VerifyRequest requires.
type VerifyOptions struct {
	// RequireHeaders names headers (any case) a v2 signature must cover.
	RequireHeaders []string
	// AllowV1 also accepts the v1 scheme (timestamp and body only).
	AllowV1 bool
}

// Payload is the text a v2 signature is the HMAC-SHA256 of:
//
//	"v2" LF timestamp LF METHOD LF path LF
//	name ":" value LF     (one line per signed header, in the listed order)
//	LF body
//
// with header names in lower case and values as received, repeated headers
// joined with ",". path is the request's escaped path, without the query.
func Payload(ts, method, path string, h http.Header, signed []string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "v2\n%s\n%s\n%s\n", ts, method, path)
	for _, name := range signed {
		fmt.Fprintf(&b, "%s:%s\n", strings.ToLower(name), strings.Join(h.Values(name), ","))
	}
	b.WriteByte('\n')
	b.Write(body)
	return b.Bytes()
}

// SignV2 returns the X-Rflow-Signature value of a v2 signature over
// Payload.
func SignV2(secret string, payload []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(payload)
	return prefixV2 + hex.EncodeToString(m.Sum(nil))
}

// SignRequest signs r (whose body is body) with the v2 scheme at now,
// covering the headers named in signed, and sets X-Rflow-Timestamp,
// X-Rflow-Signed-Headers (when signed is not empty) and X-Rflow-Signature.
func SignRequest(r *http.Request, secret string, body []byte, signed []string, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	names := make([]string, len(signed))
	for i, n := range signed {
		names[i] = strings.ToLower(n)
	}
	r.Header.Set(HeaderTimestamp, ts)
	if len(names) > 0 {
		r.Header.Set(HeaderSignedHeaders, strings.Join(names, ","))
	}
	r.Header.Set(HeaderSignature, SignV2(secret, Payload(ts, r.Method, r.URL.EscapedPath(), r.Header, names, body)))
}

// VerifyRequest checks the signature of r, whose body is body, against
// secret and returns the scheme it was made with. A v2 signature must
// cover every header of opts.RequireHeaders; a v1 signature is accepted
// only with opts.AllowV1. The timestamp must be within MaxAge of now and
// signatures are compared in constant time.
func VerifyRequest(secret string, r *http.Request, body []byte, now time.Time, opts VerifyOptions) (Scheme, error) {
	sig := r.Header.Get(HeaderSignature)
	if strings.HasPrefix(sig, prefix) {
		if !opts.AllowV1 {
			return SchemeV1, fmt.Errorf("%w: this webhook accepts only %s: v2=<hex HMAC-SHA256 of the timestamp, method, "+
				"path and body> (docs/http.md, \"Signing webhooks\")", ErrLegacy, HeaderSignature)
		}
		return SchemeV1, Verify(secret, r.Header, body, now)
	}
	ts := r.Header.Get(HeaderTimestamp)
	if ts == "" || sig == "" {
		return SchemeV2, fmt.Errorf("%w: send %s (unix seconds) and %s: v2=<hex HMAC-SHA256(secret, "+
			"\"v2\\n\" timestamp \"\\n\" method \"\\n\" path \"\\n\" signed headers \"\\n\" body)> (docs/http.md)",
			ErrMissing, HeaderTimestamp, HeaderSignature)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return SchemeV2, fmt.Errorf("%w: %s must be unix seconds", ErrMalformed, HeaderTimestamp)
	}
	if age := now.Sub(time.Unix(secs, 0)); age > MaxAge || age < -MaxAge {
		return SchemeV2, fmt.Errorf("%w: %s is more than %s away from the receiver's clock", ErrStale, HeaderTimestamp, MaxAge)
	}
	hexMAC, ok := strings.CutPrefix(sig, prefixV2)
	got, err := hex.DecodeString(hexMAC)
	if !ok || err != nil {
		return SchemeV2, fmt.Errorf("%w: %s must be v2=<hex>", ErrMalformed, HeaderSignature)
	}
	signed := signedHeaders(r.Header.Get(HeaderSignedHeaders))
	for _, need := range opts.RequireHeaders {
		if !slices.Contains(signed, strings.ToLower(need)) {
			return SchemeV2, fmt.Errorf("%w: this webhook requires header %s to be signed: list it in %s and sign its value",
				ErrUnsignedHeader, strings.ToLower(need), HeaderSignedHeaders)
		}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(Payload(ts, r.Method, r.URL.EscapedPath(), r.Header, signed, body))
	if !hmac.Equal(got, m.Sum(nil)) {
		return SchemeV2, fmt.Errorf("%w: it does not match the method, path, signed headers and body under this secret", ErrMismatch)
	}
	return SchemeV2, nil
}

// signedHeaders parses X-Rflow-Signed-Headers: comma-separated names,
// compared in lower case.
func signedHeaders(v string) []string {
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			out = append(out, n)
		}
	}
	return out
}
