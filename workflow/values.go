package workflow

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

// exprPos is the position of the expression source starting at offset
// (runes) inside the scalar n.
func exprPos(n *node, text string, offset int) Position {
	p := n.pos
	if p.Line == 0 {
		return p
	}
	if n.quoted {
		p.Col++
	}
	prefix := []rune(text)
	if offset <= len(prefix) && !strings.ContainsRune(string(prefix[:offset]), '\n') {
		p.Col += offset
	}
	return p
}

// expr compiles a field that holds one expression: "${{ x }}", or a bare
// expression without the braces, or a boolean.
func (l *loader) expr(n *node, sc *scope, what string) *Expr {
	if n == nil || n.isNull() {
		return nil
	}
	if n.kind != nodeScalar {
		l.errorf(n.pos, "%s must be a ${{ }} expression, not %s", what, n.describe())
		return nil
	}
	text := scalarText(n.val)
	if s, isStr := n.val.(string); isStr {
		var ok bool
		if text, ok = l.subst(s, n.pos); !ok {
			return nil
		}
	}
	segs, err := splitTemplate(text)
	if err != nil {
		l.errorf(n.pos, "%s: %v", what, err)
		return nil
	}
	src, offset := text, 0
	var exprs []segment
	hasText := false
	for _, s := range segs {
		if s.isExpr {
			exprs = append(exprs, s)
		} else if strings.TrimSpace(s.text) != "" {
			hasText = true
		}
	}
	switch {
	case len(exprs) == 1 && !hasText:
		src, offset = exprs[0].text, exprs[0].offset
	case len(exprs) > 0:
		l.errorf(n.pos, "%s must be a single ${{ }} expression, not text with expressions in it", what)
		return nil
	default:
		offset = leadingSpaceRunes(text)
		src = strings.TrimSpace(text)
	}
	e, ds := compileExpr(src, exprPos(n, text, offset), sc)
	l.all = append(l.all, ds...)
	return e
}

// boolExpr compiles an expression that must yield a boolean.
func (l *loader) boolExpr(n *node, sc *scope, what string) *Expr {
	e := l.expr(n, sc, what)
	if e != nil && e.typ.kind != tAny && e.typ.kind != tBool && e.typ.kind != tNil {
		l.errorf(e.pos, "%s must be a boolean expression; ${{ %s }} is %s", what, e.src, e.typ.name)
		return nil
	}
	return e
}

// value compiles any YAML value that may hold ${{ }} expressions.
func (l *loader) value(n *node, sc *scope, what string) *Value {
	if n == nil {
		return nil
	}
	switch n.kind {
	case nodeMap:
		v := &Value{kind: valueMap, pos: n.pos, m: map[string]*Value{}}
		for _, e := range n.entries {
			v.keys = append(v.keys, e.key)
			v.m[e.key] = l.value(e.value, sc, what+"."+e.key)
		}
		sort.Strings(v.keys)
		if v.allLiteral() {
			lit, _ := v.Eval(nil)
			return &Value{kind: valueLiteral, pos: n.pos, lit: lit}
		}
		return v
	case nodeSeq:
		v := &Value{kind: valueList, pos: n.pos}
		for _, it := range n.items {
			v.list = append(v.list, l.value(it, sc, what))
		}
		if v.allLiteral() {
			lit, _ := v.Eval(nil)
			return &Value{kind: valueLiteral, pos: n.pos, lit: lit}
		}
		return v
	}
	s, isStr := n.val.(string)
	if !isStr {
		return &Value{kind: valueLiteral, pos: n.pos, lit: literalValue(n.val)}
	}
	text, ok := l.subst(s, n.pos)
	if !ok {
		return &Value{kind: valueLiteral, pos: n.pos, lit: ""}
	}
	segs, err := splitTemplate(text)
	if err != nil {
		l.errorf(n.pos, "%s: %v", what, err)
		return &Value{kind: valueLiteral, pos: n.pos, lit: text}
	}
	if len(segs) == 1 && segs[0].isExpr {
		pos := exprPos(n, text, segs[0].offset)
		e, ds := compileExpr(segs[0].text, pos, sc)
		l.all = append(l.all, ds...)
		if e == nil {
			e = brokenExpr(segs[0].text, pos)
		}
		return &Value{kind: valueExpr, pos: n.pos, expr: e}
	}
	v := &Value{kind: valueTemplate, pos: n.pos}
	for _, sg := range segs {
		if !sg.isExpr {
			v.parts = append(v.parts, templatePart{text: sg.text})
			continue
		}
		pos := exprPos(n, text, sg.offset)
		e, ds := compileExpr(sg.text, pos, sc)
		l.all = append(l.all, ds...)
		if e == nil {
			e = brokenExpr(sg.text, pos)
		}
		v.parts = append(v.parts, templatePart{expr: e})
	}
	if len(v.parts) == 0 || (len(v.parts) == 1 && v.parts[0].expr == nil) {
		return &Value{kind: valueLiteral, pos: n.pos, lit: text}
	}
	return v
}

// brokenExpr stands for an expression that failed to compile (its error is
// already reported): untyped, so the field's own checks do not report the
// raw "${{ … }}" text as a second, misleading error. The project does not
// load, so it is never evaluated (Eval would return an error).
func brokenExpr(src string, pos Position) *Expr {
	return &Expr{src: src, pos: pos, typ: anyT}
}

func (v *Value) allLiteral() bool {
	for _, c := range v.m {
		if c.kind != valueLiteral {
			return false
		}
	}
	for _, c := range v.list {
		if c.kind != valueLiteral {
			return false
		}
	}
	return true
}

// staticType is the value's type as far as load time knows it.
func (v *Value) staticType() *typ {
	switch v.kind {
	case valueExpr:
		return v.expr.typ
	case valueTemplate:
		return stringT
	case valueList:
		return listT(anyT)
	case valueMap:
		return mapT(anyT)
	}
	switch v.lit.(type) {
	case nil:
		return nilT
	case string:
		return stringT
	case bool:
		return boolT
	case int64, *big.Int:
		return intT
	case float64:
		return floatT
	case []any:
		return listT(anyT)
	case map[string]any:
		return mapT(anyT)
	}
	return anyT
}

// callArgs compiles the args of a contract call and checks them against
// the method's inputs.
func (l *loader) callArgs(n *node, pos Position, m *abi.Method, sc *scope, what string) []*Value {
	var args []*Value
	for _, a := range l.list(n, what+" args", false) {
		args = append(args, l.value(a, sc, "argument"))
	}
	if m == nil {
		return args
	}
	if len(args) != len(m.Inputs) {
		l.errorf(pos, "%s: %s takes %d argument(s) (%s), got %d", what, m.Name, len(m.Inputs), describeInputs(m), len(args))
		return args
	}
	for i, a := range args {
		l.checkArg(a, m.Inputs[i], i+1, m.Name)
	}
	return args
}

func describeInputs(m *abi.Method) string {
	parts := make([]string, len(m.Inputs))
	for i, in := range m.Inputs {
		parts[i] = strings.TrimSpace(in.Type.String() + " " + in.Name)
	}
	return strings.Join(parts, ", ")
}

// checkArg checks one argument against its ABI type: literals by value,
// expressions by static type.
func (l *loader) checkArg(v *Value, in abi.Argument, idx int, method string) {
	label := fmt.Sprintf("argument %d (%s %s) of %s", idx, in.Type.String(), in.Name, method)
	if v == nil {
		return
	}
	if lit, ok := v.Literal(); ok {
		if _, err := convertArg(lit, in.Type); err != nil {
			l.errorf(v.pos, "%s: %v", label, err)
		}
		return
	}
	if st := v.staticType(); !abiCompatible(st, in.Type) {
		l.errorf(v.pos, "%s: got %s", label, st.name)
	}
}

// abiCompatible reports whether a value of static type st can be converted
// to ABI type t at run time.
func abiCompatible(st *typ, t abi.Type) bool {
	if st.kind == tAny || st.kind == tNil {
		return true
	}
	switch t.T {
	case abi.IntTy, abi.UintTy:
		return st.kind == tInt || st.kind == tString
	case abi.AddressTy:
		return st.kind == tAddress || st.kind == tString
	case abi.BoolTy:
		return st.kind == tBool
	case abi.StringTy:
		return st.stringy()
	case abi.BytesTy, abi.FixedBytesTy, abi.HashTy:
		return st.kind == tBytes || st.kind == tString
	case abi.SliceTy, abi.ArrayTy:
		return st.kind == tList
	case abi.TupleTy:
		return st.kind == tObject || st.kind == tMap
	}
	return true
}

// decodeHex decodes a 0x-prefixed hex string.
func decodeHex(s string) ([]byte, error) {
	if !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return nil, fmt.Errorf("%q is not 0x-prefixed hex", s)
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, fmt.Errorf("%q is not valid hex", s)
	}
	return b, nil
}
