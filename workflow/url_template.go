package workflow

import (
	"net/url"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// A URL written as a template ("https://api.example/u/${{ event.sender }}?tier=${{ body.tier }}")
// interpolates each value into its place in the URL percent-encoded, so
// data (a webhook body, an endpoint's answer) can fill in a path segment or
// a query value but never add a segment, a parameter or a fragment:
// {"name": "x&token=EVIL#"} in ?name=${{ body.name }}&token=… stays the
// one value of name. What a value is encoded as depends on the literal
// text before it:
//
//   - nothing (the expression starts the URL, or only expressions precede
//     it): not encoded, it is the URL or its base (${{ env.BASE }}/x);
//   - after "?" (a query): url.QueryEscape, as in a form value;
//   - after "#": url.QueryEscape;
//   - in the host (after "://", before the next "/"): everything but
//     letters, digits and -._~ is escaped;
//   - in the path: url.PathEscape, a "/" in the value included (and a
//     value of "." or ".." is encoded whole).
//
// A value written urlencode(x) is already encoded and is not encoded again.
// A URL that is one expression ("${{ steps.a.output.body.next }}") is
// not a template and is used as it is. docs/workflows.md states the rule.

// markURL makes v, a URL field's value, encode what it interpolates.
func markURL(v *Value) {
	if v == nil || v.kind != valueTemplate {
		return
	}
	v.url = true
	for i := range v.parts {
		if e := v.parts[i].expr; e != nil && isURLEncodeCall(e.src) {
			v.parts[i].encoded = true
		}
	}
}

func isURLEncodeCall(src string) bool {
	parsed, _ := bigLiterals(src)
	tree, err := safeExprParse(parsed)
	if err != nil {
		return false
	}
	call, ok := tree.Node.(*ast.CallNode)
	if !ok {
		return false
	}
	id, ok := call.Callee.(*ast.IdentifierNode)
	return ok && id.Value == "urlencode"
}

// escapeURLValue encodes s for its place after prefix, the URL built so
// far, which holds literal text.
func escapeURLValue(prefix, s string) string {
	if strings.ContainsAny(prefix, "?#") {
		return url.QueryEscape(s)
	}
	if i := strings.Index(prefix, "://"); i >= 0 && !strings.Contains(prefix[i+3:], "/") {
		return escapeStrict(s)
	}
	if s == "." || s == ".." {
		return strings.ReplaceAll(s, ".", "%2E") // a whole segment of dots would climb the path
	}
	return url.PathEscape(s)
}

// escapeStrict percent-encodes every byte but RFC 3986's unreserved ones.
func escapeStrict(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// urlencode is the expression helper: x rendered as text and encoded as a
// query value (url.QueryEscape).
func urlencode(x any) (any, error) {
	s, err := render(x)
	if err != nil {
		return nil, err
	}
	return url.QueryEscape(s), nil
}
