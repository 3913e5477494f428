package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// nodeKind is the shape of a YAML node.
type nodeKind int

const (
	nodeScalar nodeKind = iota
	nodeMap
	nodeSeq
)

// node is a YAML value with its position, independent of the YAML library.
// Scalars keep their typed value (nil, bool, int64, *big.Int, float64 or
// string); strings are raw, before ${VAR} substitution, so the canonical Spec
// never holds a resolved secret.
type node struct {
	kind    nodeKind
	pos     Position
	val     any
	quoted  bool // the scalar was written in quotes
	entries []entry
	items   []*node
}

// entry is one key of a mapping.
type entry struct {
	key    string
	keyPos Position
	value  *node
}

// get returns the value of key in a mapping, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != nodeMap {
		return nil
	}
	for _, e := range n.entries {
		if e.key == key {
			return e.value
		}
	}
	return nil
}

// isNull reports whether n is absent or an explicit null.
func (n *node) isNull() bool { return n == nil || (n.kind == nodeScalar && n.val == nil) }

// describe names the node's shape for error messages.
func (n *node) describe() string {
	if n == nil {
		return "nothing"
	}
	switch n.kind {
	case nodeMap:
		return "a mapping"
	case nodeSeq:
		return "a list"
	}
	switch n.val.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, *big.Int:
		return "an integer"
	case float64:
		return "a number"
	}
	return "a string"
}

// maxNodes bounds the size of a document after alias expansion, so a
// "billion laughs" document is an error rather than an out-of-memory crash.
const maxNodes = 200_000

// maxDepth bounds nesting, so a deeply nested document cannot exhaust the
// stack of the (recursive) checks.
const maxDepth = 200

// parseYAML parses src (YAML or JSON) into one node per document. Syntax
// errors are returned as diagnostics with the position the parser reported.
func parseYAML(file string, src []byte) (docs []*node, ds Diagnostics) {
	if d := checkYAMLDepth(file, src); d != nil {
		return nil, Diagnostics{*d}
	}
	f, err := safeParse(protectEnvRefs(src))
	if err != nil {
		pos := Position{File: file, Line: 1, Col: 1}
		msg := err.Error()
		var se *yaml.SyntaxError
		if errors.As(err, &se) {
			msg = se.Message
			if se.Token != nil && se.Token.Position != nil {
				pos.Line, pos.Col = se.Token.Position.Line, se.Token.Position.Column
			}
		}
		return nil, Diagnostics{{Pos: pos, Message: "invalid YAML: " + msg}}
	}
	c := &converter{file: file, anchors: map[string]ast.Node{}}
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		n := c.convert(doc.Body, 0)
		if c.err != nil {
			return nil, Diagnostics{*c.err}
		}
		if n != nil {
			docs = append(docs, n)
		}
	}
	return docs, nil
}

// ${VAR} references are written unquoted in flow mappings
// ({ hmac_secret: ${API_SECRET} }), where YAML forbids '{' and '}' in plain
// scalars. Before parsing, each reference is rewritten with private-use
// runes of the same length (so columns stay exact) and restored in every
// string the parser returns.
const (
	envOpen  = "\uE000\uE002"
	envClose = "\uE001"
)

func protectEnvRefs(src []byte) []byte {
	if !envRef.Match(src) {
		return src
	}
	return envRef.ReplaceAll(src, []byte(envOpen+"${1}${2}"+envClose))
}

var protectedRef = regexp.MustCompile(envOpen + `([A-Za-z_][A-Za-z0-9_]*)((?::-[^` + envClose + `]*)?)` + envClose)

func restoreEnvRefs(s string) string {
	if !strings.Contains(s, envOpen) {
		return s
	}
	return protectedRef.ReplaceAllString(s, "$${$1$2}")
}

// safeParse runs the YAML parser, turning a panic inside it into an error:
// the loader must never crash on user input, whatever the library does.
func safeParse(src []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this input (%v)", r)
		}
	}()
	return parser.ParseBytes(src, 0)
}

type converter struct {
	file    string
	anchors map[string]ast.Node
	count   int
	err     *Diagnostic
}

func (c *converter) fail(pos Position, format string, args ...any) *node {
	if c.err == nil {
		c.err = &Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...)}
	}
	return nil
}

func (c *converter) position(t *token.Token) Position {
	if t == nil || t.Position == nil {
		return Position{File: c.file}
	}
	return Position{File: c.file, Line: t.Position.Line, Col: t.Position.Column}
}

func (c *converter) convert(n ast.Node, depth int) *node {
	if c.err != nil || n == nil {
		return nil
	}
	pos := c.position(n.GetToken())
	c.count++
	if c.count > maxNodes {
		return c.fail(pos, "document too large (more than %d values after expanding aliases)", maxNodes)
	}
	if depth > maxDepth {
		return c.fail(pos, "document nested too deeply (more than %d levels)", maxDepth)
	}
	switch n := n.(type) {
	case *ast.NullNode:
		return &node{kind: nodeScalar, pos: pos}
	case *ast.BoolNode:
		return &node{kind: nodeScalar, pos: pos, val: n.Value}
	case *ast.IntegerNode:
		if n.Token != nil && len(n.Token.Value) > MaxNumberLen {
			return c.fail(pos, "a number longer than %d characters", MaxNumberLen)
		}
		return &node{kind: nodeScalar, pos: pos, val: normalizeYAMLInt(n)}
	case *ast.FloatNode:
		if n.Token != nil && len(n.Token.Value) > MaxNumberLen {
			return c.fail(pos, "a number longer than %d characters", MaxNumberLen)
		}
		return &node{kind: nodeScalar, pos: pos, val: n.Value}
	case *ast.InfinityNode, *ast.NanNode:
		return c.fail(pos, "infinite and NaN numbers are not supported")
	case *ast.StringNode:
		if err := CheckText([]byte(n.Value)); err != nil {
			return c.fail(pos, "a string Postgres cannot store: %s", err.(*InputError).Reason)
		}
		quoted := n.Token != nil && (n.Token.Type == token.SingleQuoteType || n.Token.Type == token.DoubleQuoteType)
		return &node{kind: nodeScalar, pos: pos, val: restoreEnvRefs(n.Value), quoted: quoted}
	case *ast.LiteralNode:
		if n.Value == nil {
			return &node{kind: nodeScalar, pos: pos, val: ""}
		}
		if err := CheckText([]byte(n.Value.Value)); err != nil {
			return c.fail(pos, "a string Postgres cannot store: %s", err.(*InputError).Reason)
		}
		return &node{kind: nodeScalar, pos: c.position(n.Value.Token), val: restoreEnvRefs(n.Value.Value), quoted: true}
	case *ast.AnchorNode:
		if name, ok := n.Name.(*ast.StringNode); ok && name != nil {
			c.anchors[name.Value] = n.Value
		}
		return c.convert(n.Value, depth+1)
	case *ast.AliasNode:
		name := ""
		if n.Value != nil {
			name = n.Value.GetToken().Value
		}
		target, ok := c.anchors[name]
		if !ok {
			return c.fail(pos, "unknown alias *%s", name)
		}
		return c.convert(target, depth+1)
	case *ast.TagNode:
		return c.convert(n.Value, depth+1)
	case *ast.MappingNode:
		return c.mapping(pos, n.Values, depth)
	case *ast.MappingValueNode:
		return c.mapping(pos, []*ast.MappingValueNode{n}, depth)
	case *ast.SequenceNode:
		out := &node{kind: nodeSeq, pos: pos, items: []*node{}}
		for _, v := range n.Values {
			item := c.convert(v, depth+1)
			if c.err != nil {
				return nil
			}
			if item == nil {
				item = &node{kind: nodeScalar, pos: pos}
			}
			out.items = append(out.items, item)
		}
		return out
	case *ast.CommentNode, *ast.CommentGroupNode:
		return nil
	}
	return c.fail(pos, "unsupported YAML construct %s", n.Type())
}

func (c *converter) mapping(pos Position, values []*ast.MappingValueNode, depth int) *node {
	// A block mapping's token is its first ':'; point at its first key
	// instead, where a reader looks.
	if len(values) > 0 && values[0] != nil && values[0].Key != nil {
		if kp := c.position(values[0].Key.GetToken()); kp.Line > 0 && (kp.Line < pos.Line || kp.Line == pos.Line && kp.Col < pos.Col) {
			pos = kp
		}
	}
	out := &node{kind: nodeMap, pos: pos}
	for _, mv := range values {
		if mv == nil {
			continue
		}
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			merged := c.convert(mv.Value, depth+1)
			if c.err != nil {
				return nil
			}
			if merged == nil || merged.kind != nodeMap {
				return c.fail(pos, "<< merge needs a mapping")
			}
			for _, e := range merged.entries {
				if out.get(e.key) == nil {
					out.entries = append(out.entries, e)
				}
			}
			continue
		}
		keyPos := c.position(mv.Key.GetToken())
		key := c.convert(mv.Key, depth+1)
		if c.err != nil {
			return nil
		}
		if key == nil || key.kind != nodeScalar {
			return c.fail(keyPos, "mapping keys must be plain strings")
		}
		ks := scalarText(key.val)
		for _, e := range out.entries {
			if e.key == ks {
				return c.fail(keyPos, "duplicate key %q (first at %s)", ks, e.keyPos)
			}
		}
		val := c.convert(mv.Value, depth+1)
		if c.err != nil {
			return nil
		}
		if val == nil {
			val = &node{kind: nodeScalar, pos: keyPos}
		}
		out.entries = append(out.entries, entry{key: ks, keyPos: keyPos, value: val})
	}
	return out
}

// normalizeYAMLInt keeps integers exact: int64 when they fit, *big.Int when
// they do not. A leading zero does not make octal (010 is 10, as in YAML
// 1.2 and in rflow's integer strings); octal is written 0o10.
func normalizeYAMLInt(n *ast.IntegerNode) any {
	if n.Token != nil {
		if t := strings.TrimLeft(n.Token.Value, "+-"); len(t) > 1 && t[0] == '0' && t[1] >= '0' && t[1] <= '9' {
			if b, err := parseInteger(n.Token.Value); err == nil {
				if b.IsInt64() {
					return b.Int64()
				}
				return b
			}
		}
	}
	switch v := n.Value.(type) {
	case int64:
		return v
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v)
		}
		return new(big.Int).SetUint64(v)
	case int:
		return int64(v)
	}
	if n.Token != nil {
		if b, ok := new(big.Int).SetString(strings.ReplaceAll(n.Token.Value, "_", ""), 0); ok {
			return b
		}
		return n.Token.Value
	}
	return int64(0)
}

// scalarText renders a scalar value as text (mapping keys, and numbers
// written where a string is expected).
func scalarText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case *big.Int:
		return v.String()
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// canonical returns the node as plain data for the canonical Spec: maps
// become map[string]any (encoding/json sorts their keys), so formatting,
// comments and key order do not change the result.
func (n *node) canonical() any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case nodeMap:
		m := make(map[string]any, len(n.entries))
		for _, e := range n.entries {
			m[e.key] = e.value.canonical()
		}
		return m
	case nodeSeq:
		l := make([]any, len(n.items))
		for i, it := range n.items {
			l[i] = it.canonical()
		}
		return l
	}
	switch v := n.val.(type) {
	case *big.Int:
		return json.Number(v.String())
	case int64:
		return json.Number(strconv.FormatInt(v, 10))
	case float64:
		return json.Number(floatText(v))
	}
	return n.val
}

// floatText writes a float so that it always reads back as a float, even
// after Postgres jsonb rewrote it (jsonb drops exponents but keeps a
// decimal point): 1e21 becomes "1000000000000000000000.0".
func floatText(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// nodeFromJSON rebuilds a node tree from decoded canonical JSON (see
// CompileSpec). Positions are all pos: a stored Spec has no lines.
func nodeFromJSON(v any, pos Position, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errors.New("spec nested too deeply")
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := &node{kind: nodeMap, pos: pos}
		for _, k := range keys {
			child, err := nodeFromJSON(v[k], pos, depth+1)
			if err != nil {
				return nil, err
			}
			out.entries = append(out.entries, entry{key: k, keyPos: pos, value: child})
		}
		return out, nil
	case []any:
		out := &node{kind: nodeSeq, pos: pos, items: make([]*node, 0, len(v))}
		for _, it := range v {
			child, err := nodeFromJSON(it, pos, depth+1)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, child)
		}
		return out, nil
	case json.Number:
		if !strings.ContainsAny(string(v), ".eE") {
			if i, err := v.Int64(); err == nil {
				return &node{kind: nodeScalar, pos: pos, val: i}, nil
			}
			if b, ok := new(big.Int).SetString(string(v), 10); ok {
				return &node{kind: nodeScalar, pos: pos, val: b}, nil
			}
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("spec number %s: %w", v, err)
		}
		return &node{kind: nodeScalar, pos: pos, val: f}, nil
	case string:
		return &node{kind: nodeScalar, pos: pos, val: v, quoted: true}, nil
	case bool, nil:
		return &node{kind: nodeScalar, pos: pos, val: v}, nil
	}
	return nil, fmt.Errorf("spec holds an unexpected %T", v)
}
