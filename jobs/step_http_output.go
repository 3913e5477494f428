package jobs

import (
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/rflow-dev/rflow/workflow"
)

// Whatever an endpoint answers is journaled: a step's output that Postgres
// refused would fail the attempt's settle after its effect, and the effect
// would run again. So a response is checked before it becomes output, and
// what jsonb or text cannot hold is kept exactly, as base64:
//
//	{"status": 200, "headers": {...}, "body": "eyJhIjoieAB5In0=", "base64": ["body"]}
//
// "base64" lists the fields (body, headers.<Name>) whose value is the
// standard base64 (RFC 4648, padded) of the bytes received; it is absent
// when nothing was encoded. docs/workflows.md describes the rule.
const base64Field = "base64"

// responseOutput is an http_call's (or notify's) output for a response.
func responseOutput(status int, h http.Header, raw []byte) map[string]any {
	var encoded []any
	headers := make(map[string]any, len(h))
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		name := http.CanonicalHeaderKey(k)
		if workflow.CheckText([]byte(v[0])) != nil {
			headers[name] = base64.StdEncoding.EncodeToString([]byte(v[0]))
			encoded = append(encoded, "headers."+name)
			continue
		}
		headers[name] = v[0]
	}
	body, ok := decodeBody(h.Get("Content-Type"), raw)
	if !ok {
		body = base64.StdEncoding.EncodeToString(raw)
		encoded = append(encoded, "body")
	}
	out := map[string]any{"status": int64(status), "headers": headers, "body": body}
	if encoded != nil {
		out[base64Field] = encoded
	}
	return out
}

// decodeBody keeps JSON responses structured (with exact big integers), and
// anything else as text. ok is false when neither can be stored: a JSON
// body holding a NUL, an unpaired surrogate, a number over
// workflow.MaxNumberLen or nesting deeper than workflow.MaxInputDepth, or
// any body that is not UTF-8 or holds a NUL byte. A JSON body that is merely
// malformed is text.
func decodeBody(contentType string, raw []byte) (any, bool) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		v, err := workflow.DecodeInput(raw)
		var ie *workflow.InputError
		switch {
		case err == nil:
			return v, true
		case errors.As(err, &ie):
			return nil, false
		}
	}
	if workflow.CheckText(raw) != nil {
		return nil, false
	}
	return string(raw), true
}

// printable renders bytes an endpoint sent for a journaled error message
// (text): invalid UTF-8 becomes U+FFFD and a NUL is written \x00.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", `\x00`)
	}
	return s
}
