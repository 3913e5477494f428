package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// FuzzCheckJSON: CheckJSON never panics, points inside the input when it
// refuses, and what it accepts and the decoder decodes is storable: no
// NUL, only UTF-8, bounded numbers and nesting.
func FuzzCheckJSON(f *testing.F) {
	for _, seed := range []string{
		`{"a":"x\u0000y"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud83d"}`, `"\udc00"`, "{\"a\":\"\xff\"}",
		`[1e400, -0.5, 115792089237316195423570985008687907853269984665640564039457584007913129639935]`,
		strings.Repeat("[", 201) + strings.Repeat("]", 201), `{"k\\u0000":"\\"}`, `"\u00`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		defer watchdog(string(b), 5*time.Second)()
		err := CheckJSON(b)
		var ie *InputError
		if err != nil {
			if !errors.As(err, &ie) || ie.Offset < 0 || ie.Offset > len(b) {
				t.Fatalf("CheckJSON(%q) = %v, want an *InputError inside the input", b, err)
			}
			return
		}
		v, err := UnmarshalJSON(b)
		if err != nil {
			return // bad syntax: the decoder's to report
		}
		out, err := MarshalJSON(v)
		if err != nil {
			t.Fatalf("accepted %q decodes to a value that does not encode: %v", b, err)
		}
		if hasNUL(v) {
			t.Fatalf("accepted %q holds a NUL: %s", b, out)
		}
		if depthOf(v) > MaxInputDepth {
			t.Fatalf("accepted %q nests deeper than %d", b, MaxInputDepth)
		}
		var raw any
		if json.Unmarshal(out, &raw) != nil {
			t.Fatalf("accepted %q re-encodes to invalid JSON %s", b, out)
		}
	})
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case map[string]any:
		for k, e := range v {
			if hasNUL(k) || hasNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	}
	return false
}

func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// FuzzYAMLDepth: the depth pre-scan never panics, is fast on any input,
// and never refuses a document the YAML library parses to a tree of
// moderate depth (it may count a level or two too many, never dozens).
func FuzzYAMLDepth(f *testing.F) {
	for _, seed := range []string{
		"name: w\nsteps:\n  - id: a\n    noop: {}\n",
		"a: |\n  [[[\nb: [1, {c: \"]\"}]\n",
		"- - - [x, '[[', \"{{\"]\n",
		"k: \"multi\n  [[ line\"\n? [a, b]\n: v\n",
		strings.Repeat("[", 250) + strings.Repeat("]", 250),
		strings.Repeat("- ", 250) + "x\n",
		"a: &x [1, 2]\nb: !!seq [*x]\n# [[[\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		defer watchdog(string(src), 5*time.Second)()
		d := checkYAMLDepth("f.yaml", src)
		if d == nil || len(src) > 4096 {
			return
		}
		if d.Pos.Line < 1 || d.Pos.Col < 1 {
			t.Fatalf("refusal without a position: %v", d)
		}
		file, err := safeParse(protectEnvRefs(src))
		if err != nil {
			return
		}
		c := &converter{file: "f.yaml", anchors: map[string]ast.Node{}}
		for _, doc := range file.Docs {
			if doc == nil || doc.Body == nil {
				continue
			}
			if n := c.convert(doc.Body, 0); n != nil && nodeDepth(n) < MaxInputDepth/2 {
				t.Fatalf("refused %q (%v) though it nests only %d levels", src, d, nodeDepth(n))
			}
		}
	})
}

func nodeDepth(n *node) int {
	if n == nil {
		return 0
	}
	d := 0
	for _, e := range n.entries {
		d = max(d, nodeDepth(e.value))
	}
	for _, it := range n.items {
		d = max(d, nodeDepth(it))
	}
	if n.kind == nodeScalar {
		return 0
	}
	return d + 1
}

// FuzzIndentJSON: on any valid JSON, IndentJSON writes what json.Indent
// writes while the depth allows, and valid JSON of the same value below.
func FuzzIndentJSON(f *testing.F) {
	for _, seed := range []string{`{"a":[1,{"b":"x\"]}"}],"c":{},"d":[]}`, `[[[[["deep"]]]]]`, `"s"`, `{"k":"\\"}`} {
		f.Add([]byte(seed), 2)
	}
	f.Fuzz(func(t *testing.T, b []byte, maxDepth int) {
		var compact bytes.Buffer
		if json.Compact(&compact, b) != nil {
			return
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := IndentJSON(compact.Bytes(), 1<<20); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("IndentJSON(%s)\n got %s\nwant %s", compact.Bytes(), got, want.Bytes())
		}
		got := IndentJSON(compact.Bytes(), maxDepth%64)
		var again bytes.Buffer
		if err := json.Compact(&again, got); err != nil || !bytes.Equal(again.Bytes(), compact.Bytes()) {
			t.Fatalf("IndentJSON(%s, %d) = %s is not the same JSON (%v)", compact.Bytes(), maxDepth%64, got, err)
		}
	})
}
