package workflow

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Env is the data an expression evaluates against. Its keys are the
// expression variables:
//
//	event    the decoded log (ABI args + block, block_hash, tx_hash, log_index, tx_log_index, address)
//	trigger  key, kind and the kind's payload: event | tick | block | result | headers, body | input
//	steps    step id → {"output": …, "status": …}
//	run      id, workflow, attempt, generation
//	env      process environment variables exposed to expressions
//	item, index         inside foreach bodies
//	result              read triggers
//	headers, body       webhook triggers
//
// Values are what UnmarshalJSON produces (or anything Normalize accepts);
// fresh *big.Int and journaled int64 values behave the same.
type Env map[string]any

// Expr is a compiled ${{ }} expression.
type Expr struct {
	src  string
	pos  Position
	prog *vm.Program
	typ  *typ
	// positions: see checker.positions.
	positions map[int]string
}

// Source returns the expression text between ${{ and }}.
func (e *Expr) Source() string { return e.src }

// Pos returns where the expression starts in the project.
func (e *Expr) Pos() Position {
	if e == nil {
		return Position{}
	}
	return e.pos
}

// String returns the expression as written: "${{ source }}".
func (e *Expr) String() string { return "${{ " + e.src + " }}" }

// fetchFromNil is expr's message for a member read on nil.
var fetchFromNil = regexp.MustCompile(`^cannot fetch (\S+) from <nil>`)

// Eval evaluates the expression. A failure names the expression and its
// position, so the step error tells the user what to fix.
func (e *Expr) Eval(env Env) (any, error) {
	if e == nil || e.prog == nil {
		return nil, errors.New("evaluate: expression was not compiled")
	}
	out, err := expr.Run(e.prog, map[string]any(env))
	if err != nil {
		msg := err.Error()
		var fe *file.Error
		if errors.As(err, &fe) {
			msg = fe.Message
		}
		if m := fetchFromNil.FindStringSubmatch(msg); m != nil {
			// expr's "cannot fetch x from <nil>" reads as an internal
			// error; the user's data simply lacks the value.
			msg = fmt.Sprintf("cannot read .%s of a missing (null) value; write ?.%s to get null instead, and ?? for a default", m[1], m[1])
		}
		return nil, fmt.Errorf("%s: evaluate %s: %s", e.pos, e, msg)
	}
	return out, nil
}

// Bool evaluates the expression and requires a boolean result (nil counts
// as false, so `if: ${{ steps.x.output.flag }}` on a missing flag skips).
func (e *Expr) Bool(env Env) (bool, error) {
	v, err := e.Eval(env)
	if err != nil {
		return false, err
	}
	switch v := v.(type) {
	case bool:
		return v, nil
	case nil:
		return false, nil
	}
	return false, fmt.Errorf("%s: %s evaluated to %s, want a boolean", e.pos, e, typeName(v))
}

// valueKind is the shape of a Value.
type valueKind int

const (
	valueLiteral valueKind = iota
	valueExpr
	valueTemplate
	valueMap
	valueList
)

// Value is a YAML value that may hold ${{ }} expressions: a literal, a
// single expression (which keeps its type: "${{ event.amount }}" is a
// *big.Int), a string with expressions interpolated into it, or a map or
// list of Values.
type Value struct {
	kind  valueKind
	pos   Position
	lit   any
	expr  *Expr
	parts []templatePart
	keys  []string
	m     map[string]*Value
	list  []*Value
	// url: a URL template, whose interpolated values are percent-encoded
	// for their place (url_template.go).
	url bool
}

type templatePart struct {
	text string
	expr *Expr
	// encoded: the expression is a urlencode() call, already encoded.
	encoded bool
}

// Pos returns where the value is written.
func (v *Value) Pos() Position {
	if v == nil {
		return Position{}
	}
	return v.pos
}

// Literal returns the value when it holds no expression.
func (v *Value) Literal() (any, bool) {
	if v == nil {
		return nil, true
	}
	if v.kind != valueLiteral {
		return nil, false
	}
	return v.lit, true
}

// Expr returns the single expression the value consists of, or nil.
func (v *Value) Expr() *Expr {
	if v == nil || v.kind != valueExpr {
		return nil
	}
	return v.expr
}

// Eval evaluates the value: literals as written (integers int64 or
// *big.Int), expressions to their result, templates to a string, maps and
// lists element by element.
func (v *Value) Eval(env Env) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch v.kind {
	case valueLiteral:
		return cloneLiteral(v.lit), nil
	case valueExpr:
		return v.expr.Eval(env)
	case valueTemplate:
		var b strings.Builder
		literal := false // literal text was written: a URL's values are encoded from here on
		for _, p := range v.parts {
			if p.expr == nil {
				b.WriteString(p.text)
				literal = literal || p.text != ""
				continue
			}
			r, err := p.expr.Eval(env)
			if err != nil {
				return nil, err
			}
			s, err := render(r)
			if err != nil {
				return nil, fmt.Errorf("%s: render %s: %w", p.expr.pos, p.expr, err)
			}
			if v.url && literal && !p.encoded {
				s = escapeURLValue(b.String(), s)
			}
			b.WriteString(s)
		}
		return b.String(), nil
	case valueMap:
		out := make(map[string]any, len(v.keys))
		for _, k := range v.keys {
			r, err := v.m[k].Eval(env)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case valueList:
		out := make([]any, len(v.list))
		for i, e := range v.list {
			r, err := e.Eval(env)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return nil, errors.New("evaluate: unknown value kind")
}

// String evaluates the value and renders it as text: strings as they are,
// integers in decimal (exact), nil as "", maps and lists as JSON.
func (v *Value) String(env Env) (string, error) {
	r, err := v.Eval(env)
	if err != nil {
		return "", err
	}
	s, err := render(r)
	if err != nil {
		return "", fmt.Errorf("%s: render value: %w", v.pos, err)
	}
	return s, nil
}

// render turns an evaluated value into text for interpolation.
func render(v any) (string, error) {
	switch v := hexForm(v).(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	if n, ok := toNumber(v); ok {
		if n.isFloat {
			return strconv.FormatFloat(n.f, 'f', -1, 64), nil
		}
		return n.i.String(), nil
	}
	b, err := MarshalJSON(v)
	return string(b), err
}

// opPatcher rewrites arithmetic and comparison operators into calls to the
// exact functions in ops.go.
type opPatcher struct{}

func (opPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if fn, ok := operatorFuncs[n.Operator]; ok {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Left, n.Right}})
		}
	case *ast.UnaryNode:
		switch n.Operator {
		case "-":
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__neg"}, Arguments: []ast.Node{n.Node}})
		case "+":
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__pos"}, Arguments: []ast.Node{n.Node}})
		}
	}
}

// exprOptions are the compile options of every expression: rflow's helpers,
// exact operators, and variables resolved at run time from the Env map.
func exprOptions() []expr.Option {
	boolType := new(func(any, any) bool)
	one := func(name string, f func(any) (any, error)) expr.Option {
		return expr.Function(name, func(p ...any) (any, error) {
			if len(p) != 1 {
				return nil, fmt.Errorf("%s takes 1 argument", name)
			}
			return f(p[0])
		})
	}
	two := func(name string, f func(any, any) (any, error)) expr.Option {
		return expr.Function(name, func(p ...any) (any, error) {
			if len(p) != 2 {
				return nil, fmt.Errorf("%s takes 2 arguments", name)
			}
			return f(p[0], p[1])
		})
	}
	opts := []expr.Option{
		expr.AllowUndefinedVariables(),
		expr.Patch(opPatcher{}),
		expr.Function("__lt", cmpFunc(func(c int) bool { return c < 0 }), boolType),
		expr.Function("__le", cmpFunc(func(c int) bool { return c <= 0 }), boolType),
		expr.Function("__gt", cmpFunc(func(c int) bool { return c > 0 }), boolType),
		expr.Function("__ge", cmpFunc(func(c int) bool { return c >= 0 }), boolType),
		two("__eq", func(a, b any) (any, error) { return equal(a, b), nil }),
		two("__ne", func(a, b any) (any, error) { return !equal(a, b), nil }),
		expr.Function("__neg", negate),
		expr.Function("__pos", plus),
		one("ether", func(x any) (any, error) { return unitsOf(x, 18) }),
		one("gwei", func(x any) (any, error) { return unitsOf(x, 9) }),
		two("units", unitsOf),
		one("bigint", func(x any) (any, error) { return toBigInt(x) }),
		one("urlencode", urlencode),
		two("format_units", func(x, d any) (any, error) { return formatUnits(x, d) }),
	}
	for _, op := range []string{"+", "-", "*", "/", "%", "**"} {
		opts = append(opts, expr.Function(operatorFuncs[op], arith(op)))
	}
	return opts
}

// compileExpr parses, types and compiles src, which starts at pos. Problems
// are returned as diagnostics at their position inside the expression.
func compileExpr(src string, pos Position, sc *scope) (*Expr, Diagnostics) {
	at := func(offset int) Position {
		p := pos
		if p.Line > 0 && offset > 0 && !strings.Contains(src, "\n") {
			p.Col += offset
		}
		return p
	}
	if strings.TrimSpace(src) == "" {
		return nil, Diagnostics{{Pos: pos, Message: "empty expression ${{ }}"}}
	}
	parsed, lits := bigLiterals(src)
	tree, err := safeExprParse(parsed)
	if err != nil {
		offset, msg := 0, err.Error()
		var fe *file.Error
		if errors.As(err, &fe) {
			offset, msg = fe.From, fe.Message
		}
		return nil, Diagnostics{{Pos: at(offset), Message: fmt.Sprintf("invalid expression ${{ %s }}: %s", src, msg)}}
	}
	if lits != nil {
		ast.Walk(&tree.Node, bigLiteralPatcher{lits})
	}
	c := &checker{sc: sc, locals: map[string]*typ{}}
	t := c.typeOf(tree.Node)
	if len(c.issues) > 0 {
		var ds Diagnostics
		for _, is := range c.issues {
			ds = append(ds, Diagnostic{Pos: at(is.offset), Message: fmt.Sprintf("in ${{ %s }}: %s", src, is.msg)})
		}
		return nil, ds
	}
	prog, err := safeCompile(parsed, lits, c.positions)
	if err != nil {
		offset, msg := 0, err.Error()
		var fe *file.Error
		if errors.As(err, &fe) {
			offset, msg = fe.From, fe.Message
		}
		return nil, Diagnostics{{Pos: at(offset), Message: fmt.Sprintf("invalid expression ${{ %s }}: %s", src, msg)}}
	}
	return &Expr{src: src, pos: pos, prog: prog, typ: t, positions: c.positions}, nil
}

func safeExprParse(src string) (tree *parser.Tree, err error) {
	defer func() {
		if r := recover(); r != nil {
			tree, err = nil, fmt.Errorf("the expression parser failed on this input (%v)", r)
		}
	}()
	return parser.Parse(src)
}

func safeCompile(src string, lits map[string]string, positions map[int]string) (prog *vm.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, fmt.Errorf("the expression compiler failed on this input (%v)", r)
		}
	}()
	opts := exprOptions()
	if lits != nil {
		opts = append([]expr.Option{expr.Patch(bigLiteralPatcher{lits})}, opts...)
	}
	if positions != nil {
		opts = append([]expr.Option{expr.Patch(positionPatcher{positions})}, opts...)
	}
	return expr.Compile(src, opts...)
}

// segment is a piece of a string scalar: plain text or an expression.
type segment struct {
	text   string
	isExpr bool
	offset int // rune offset of the expression source in the scalar
}

// splitTemplate splits s into text and ${{ }} segments. An expression ends
// at the first "}}" outside string literals and nested braces.
func splitTemplate(s string) ([]segment, error) {
	var out []segment
	i := 0
	for {
		j := strings.Index(s[i:], "${{")
		if j < 0 {
			if i < len(s) {
				out = append(out, segment{text: s[i:]})
			}
			return out, nil
		}
		if j > 0 {
			out = append(out, segment{text: s[i : i+j]})
		}
		start := i + j + 3
		end, err := exprEnd(s, start)
		if err != nil {
			return nil, err
		}
		out = append(out, segment{text: strings.TrimSpace(s[start:end]), isExpr: true,
			offset: utf8.RuneCountInString(s[:start]) + leadingSpaceRunes(s[start:end])})
		i = end + 2
	}
}

func leadingSpaceRunes(s string) int {
	return utf8.RuneCountInString(s) - utf8.RuneCountInString(strings.TrimLeft(s, " \t\r\n"))
}

// exprEnd returns the index of the "}}" that closes the expression starting
// at start.
func exprEnd(s string, start int) (int, error) {
	depth := 0
	var quote byte
	for k := start; k < len(s); k++ {
		ch := s[k]
		if quote != 0 {
			switch {
			case ch == '\\' && quote != '`':
				k++
			case ch == quote:
				quote = 0
			}
			continue
		}
		switch ch {
		case '\'', '"', '`':
			quote = ch
		case '{':
			depth++
		case '}':
			if depth == 0 {
				if k+1 < len(s) && s[k+1] == '}' {
					return k, nil
				}
				return 0, errors.New("unbalanced } in ${{ }} expression")
			}
			depth--
		}
	}
	return 0, errors.New("unterminated ${{ expression: missing }}")
}

// cloneLiteral copies mutable literals so a caller changing an evaluated
// value cannot change the compiled definition.
func cloneLiteral(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = cloneLiteral(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneLiteral(e)
		}
		return out
	case *big.Int:
		return new(big.Int).Set(v)
	}
	return v
}

// literalValue converts a scalar for a literal Value: integers stay exact.
func literalValue(v any) any {
	if b, ok := v.(*big.Int); ok {
		return new(big.Int).Set(b)
	}
	return v
}
