package workflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// webhookSigning reads a webhook trigger's signed_headers and
// legacy_signatures and checks its idempotency key against what the
// signature covers. A signed webhook's key must read only signed data:
// the body, and headers the v2 signature is required to cover, which
// include every header the key reads by name. A key that
// reads anything else lets a captured request, re-sent within the
// signature's five minutes with another value there, start a new run.
func (l *loader) webhookSigning(wt *WebhookTrigger, m map[string]*node) {
	if h := m["signed_headers"]; !h.isNull() {
		for _, item := range l.list(h, "signed_headers", true) {
			name, ok := l.scalar(item, "signed_headers")
			if !ok {
				continue
			}
			name = strings.ToLower(strings.TrimSpace(name))
			if !headerName(name) {
				l.errorf(item.pos, "signed_headers: %q is not a header name", name)
				continue
			}
			wt.SignedHeaders = append(wt.SignedHeaders, name)
		}
		if m["secret"].isNull() {
			l.errorf(h.pos, "signed_headers needs a secret: only signed requests cover headers")
		}
	}
	if lg := m["legacy_signatures"]; !lg.isNull() {
		wt.LegacySignatures, _ = l.boolean(lg, "legacy_signatures")
		if wt.LegacySignatures {
			l.warnf(lg.pos, "legacy_signatures is deprecated: v1 signatures (X-Rflow-Signature: sha256=…) cover only the "+
				"timestamp and body, so a request signed for another webhook sharing the secret is accepted here; "+
				"move senders to v2 (docs/http.md) and remove this")
		}
	}
	k := m["idempotency_key"]
	if m["secret"].isNull() || wt.IdempotencyKey == nil {
		return
	}
	covered := wt.SignedHeaders
	if wt.LegacySignatures {
		covered = nil // a v1 request signs no header
	} else {
		// A header the key reads by name must be signed: it joins
		// signed_headers, so a request whose v2 signature leaves it out
		// is refused (and the key can never read an unsigned value).
		for _, name := range namedHeaderReads(wt.IdempotencyKey.Source()) {
			if !slices.Contains(wt.SignedHeaders, name) {
				wt.SignedHeaders = append(wt.SignedHeaders, name)
			}
		}
		covered = wt.SignedHeaders
	}
	for _, read := range unsignedReads(wt.IdempotencyKey.Source(), covered) {
		hint := "list the header in signed_headers (senders then sign it, docs/http.md) or key on body fields"
		if wt.LegacySignatures {
			hint = "v1 signatures accepted by legacy_signatures cover no header: key on body fields"
		}
		l.errorf(k.pos, "idempotency_key reads %s, which the webhook's signature does not cover: a captured request "+
			"re-sent with another value there would start a new run; %s", read, hint)
	}
}

func headerName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// unsignedReads lists what an idempotency key expression reads of its
// request outside the body and the covered headers: headers['name'] for a
// header not covered, "headers" for any other use of the headers map.
func unsignedReads(src string, covered []string) []string {
	parsed, _ := bigLiterals(src)
	tree, err := safeExprParse(parsed)
	if err != nil {
		return nil // compiling the key reported it
	}
	f := &headerReads{}
	ast.Walk(&tree.Node, f)
	var out []string
	for _, r := range f.reads {
		if r.name != "" && slices.Contains(covered, strings.ToLower(r.name)) {
			continue
		}
		what := "headers (as a whole)"
		if r.name != "" {
			what = fmt.Sprintf("headers['%s']", strings.ToLower(r.name))
		}
		if !slices.Contains(out, what) {
			out = append(out, what)
		}
	}
	return out
}

// namedHeaderReads lists (lower case) the headers an idempotency key reads
// as headers['name'].
func namedHeaderReads(src string) []string {
	parsed, _ := bigLiterals(src)
	tree, err := safeExprParse(parsed)
	if err != nil {
		return nil
	}
	f := &headerReads{}
	ast.Walk(&tree.Node, f)
	var out []string
	for _, r := range f.reads {
		if name := strings.ToLower(r.name); r.name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

type headerRead struct {
	ident *ast.IdentifierNode
	name  string // "" unless read as headers['name'] / headers.name
}

// headerReads collects the uses of the headers variable. ast.Walk visits
// a node's children before the node, so a member read headers['x'] meets
// its identifier first and then names it.
type headerReads struct{ reads []headerRead }

func (f *headerReads) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if n.Value == "headers" {
			f.reads = append(f.reads, headerRead{ident: n})
		}
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		s, isName := n.Property.(*ast.StringNode)
		if !ok || !isName || id.Value != "headers" {
			return
		}
		for i := range f.reads {
			if f.reads[i].ident == id {
				f.reads[i].name = s.Value
			}
		}
	}
}
