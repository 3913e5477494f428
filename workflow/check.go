package workflow

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/expr-lang/expr/ast"
)

// This file types expressions at load time. expr's own checker cannot see
// through the map-shaped runtime environment, so rflow describes each
// variable with a typ (derived from ABIs, the trigger kind and the step
// ids) and walks the expression tree itself: unknown variables and fields
// get a position and a suggestion, and mismatched operands (a uint256
// compared with a string) are errors before anything runs.

type tkind int

const (
	tAny tkind = iota
	tInt
	tFloat
	tString
	tBool
	tAddress
	tBytes
	tObject
	tList
	tMap
	tNil
)

// typ is the static type of an expression value.
type typ struct {
	kind tkind
	// name is how errors call it ("uint256", "address", "event Deposit").
	name   string
	fields map[string]*typ // tObject: the known fields (closed)
	// unknownField, when set, is the message (a format taking the field)
	// for reading a field an object does not have.
	unknownField string
	elem         *typ // tList, tMap
	// abi marks an integer an ABI declared (uint256, int8, …): request
	// bodies write it as a decimal string at every magnitude (json_typed.go).
	abi bool
	// order is the fields of an ABI result or tuple by position, so that
	// x[0] reads the first (index.go).
	order []string
}

var (
	anyT    = &typ{kind: tAny, name: "any"}
	intT    = &typ{kind: tInt, name: "integer"}
	floatT  = &typ{kind: tFloat, name: "number"}
	stringT = &typ{kind: tString, name: "string"}
	boolT   = &typ{kind: tBool, name: "bool"}
	nilT    = &typ{kind: tNil, name: "nil"}
	addrT   = &typ{kind: tAddress, name: "address"}
	hashT   = &typ{kind: tBytes, name: "bytes32"}
)

func objectT(name string, fields map[string]*typ) *typ {
	return &typ{kind: tObject, name: name, fields: fields}
}

func listT(elem *typ) *typ { return &typ{kind: tList, name: "list", elem: elem} }
func mapT(elem *typ) *typ  { return &typ{kind: tMap, name: "map", elem: elem} }

func (t *typ) numeric() bool { return t.kind == tInt || t.kind == tFloat }
func (t *typ) stringy() bool {
	return t.kind == tString || t.kind == tAddress || t.kind == tBytes
}

// abiTyp describes an ABI type as expressions see it.
func abiTyp(t abi.Type) *typ {
	switch t.T {
	case abi.IntTy, abi.UintTy:
		return &typ{kind: tInt, name: t.String(), abi: true}
	case abi.BoolTy:
		return boolT
	case abi.StringTy:
		return stringT
	case abi.AddressTy:
		return addrT
	case abi.BytesTy, abi.FixedBytesTy, abi.HashTy, abi.FunctionTy:
		return &typ{kind: tBytes, name: t.String()}
	case abi.SliceTy, abi.ArrayTy:
		if t.Elem != nil {
			return listT(abiTyp(*t.Elem))
		}
	case abi.TupleTy:
		fields := map[string]*typ{}
		for i, name := range t.TupleRawNames {
			if i < len(t.TupleElems) && t.TupleElems[i] != nil {
				fields[name] = abiTyp(*t.TupleElems[i])
			}
		}
		tt := objectT("tuple", fields)
		tt.order = slices.Clone(t.TupleRawNames)
		return tt
	}
	return anyT
}

// scope is the set of variables an expression may use where it appears.
type scope struct {
	vars map[string]*typ
	// absent explains variables that exist elsewhere but not here
	// ("result is only available in read triggers").
	absent map[string]string
}

func (s *scope) with(name string, t *typ) *scope {
	out := &scope{vars: maps.Clone(s.vars), absent: maps.Clone(s.absent)}
	out.vars[name] = t
	delete(out.absent, name)
	return out
}

// exprIssue is a problem at a rune offset of an expression's source.
type exprIssue struct {
	offset int
	msg    string
}

// builtinFuncs are rflow's expression helpers with their result types.
var helperResults = map[string]*typ{
	"ether": intT, "gwei": intT, "units": intT, "bigint": intT, "format_units": stringT,
	"urlencode": stringT,
}

var helperArity = map[string]int{"ether": 1, "gwei": 1, "units": 2, "bigint": 1, "format_units": 2, "urlencode": 1}

type checker struct {
	sc     *scope
	locals map[string]*typ
	issues []exprIssue
	// positions are the fields that x[i] on a positional object reads, by
	// the offset of i, for the compiled program (index.go).
	positions map[int]string
}

func (c *checker) errorf(n ast.Node, format string, args ...any) {
	c.issues = append(c.issues, exprIssue{offset: n.Location().From, msg: fmt.Sprintf(format, args...)})
}

// typeOf walks n and returns its static type.
func (c *checker) typeOf(n ast.Node) *typ {
	switch n := n.(type) {
	case nil:
		return anyT
	case *ast.NilNode:
		return nilT
	case *ast.IntegerNode:
		return intT
	case *ast.FloatNode:
		return floatT
	case *ast.BoolNode:
		return boolT
	case *ast.StringNode:
		return stringT
	case *ast.BytesNode, *ast.ConstantNode, *ast.PointerNode:
		return anyT
	case *ast.IdentifierNode:
		return c.identifier(n)
	case *ast.ChainNode:
		return c.typeOf(n.Node)
	case *ast.MemberNode:
		return c.member(n)
	case *ast.SliceNode:
		t := c.typeOf(n.Node)
		c.typeOf(n.From)
		c.typeOf(n.To)
		if t.kind != tAny && t.kind != tList && !t.stringy() {
			c.errorf(n, "cannot slice %s: it is %s, not a list or a string", n.Node, t.name)
			return anyT
		}
		return t
	case *ast.CallNode:
		return c.call(n)
	case *ast.BuiltinNode:
		for _, a := range n.Arguments {
			c.typeOf(a)
		}
		switch n.Name {
		case "len", "count", "findIndex", "findLastIndex", "indexOf", "lastIndexOf":
			return intT
		case "all", "none", "any", "one", "hasPrefix", "hasSuffix":
			return boolT
		case "string", "trim", "trimPrefix", "trimSuffix", "upper", "lower", "replace", "repeat", "join", "toJSON", "toBase64":
			return stringT
		case "filter", "map", "sortBy", "split", "splitAfter", "keys", "values", "take", "reverse", "uniq", "concat", "flatten", "sort":
			return listT(anyT)
		}
		return anyT
	case *ast.PredicateNode:
		c.typeOf(n.Node)
		return anyT
	case *ast.VariableDeclaratorNode:
		vt := c.typeOf(n.Value)
		prev, had := c.locals[n.Name]
		c.locals[n.Name] = vt
		t := c.typeOf(n.Expr)
		if had {
			c.locals[n.Name] = prev
		} else {
			delete(c.locals, n.Name)
		}
		return t
	case *ast.SequenceNode:
		t := anyT
		for _, e := range n.Nodes {
			t = c.typeOf(e)
		}
		return t
	case *ast.ConditionalNode:
		c.typeOf(n.Cond)
		a, b := c.typeOf(n.Exp1), c.typeOf(n.Exp2)
		if a.kind == b.kind && a.kind != tObject {
			return a
		}
		return anyT
	case *ast.ArrayNode:
		for _, e := range n.Nodes {
			c.typeOf(e)
		}
		return listT(anyT)
	case *ast.MapNode:
		for _, p := range n.Pairs {
			c.typeOf(p)
		}
		return mapT(anyT)
	case *ast.PairNode:
		c.typeOf(n.Key)
		c.typeOf(n.Value)
		return anyT
	case *ast.UnaryNode:
		t := c.typeOf(n.Node)
		switch n.Operator {
		case "-", "+":
			if t.kind != tAny && !t.numeric() {
				c.errorf(n, "cannot apply %s to %s", n.Operator, t.name)
			}
			return t
		}
		return boolT
	case *ast.BinaryNode:
		return c.binary(n)
	}
	return anyT
}

func (c *checker) identifier(n *ast.IdentifierNode) *typ {
	if t, ok := c.locals[n.Value]; ok {
		return t
	}
	if t, ok := c.sc.vars[n.Value]; ok {
		return t
	}
	if why, ok := c.sc.absent[n.Value]; ok {
		c.errorf(n, "%s", why)
		return anyT
	}
	names := slices.Collect(maps.Keys(c.sc.vars))
	names = append(names, slices.Collect(maps.Keys(c.locals))...)
	sort.Strings(names)
	c.errorf(n, "unknown variable %s%s (available: %s)", n.Value, suggest(n.Value, names), joinNames(names))
	return anyT
}

func (c *checker) member(n *ast.MemberNode) *typ {
	t := c.typeOf(n.Node)
	prop, isName := n.Property.(*ast.StringNode)
	if !isName {
		it := c.typeOf(n.Property)
		switch t.kind {
		case tList:
			if it.kind != tAny && it.kind != tInt {
				c.errorf(n.Property, "list index must be an integer, not %s", it.name)
			}
			return t.elem
		case tMap:
			return t.elem
		case tObject:
			if t.order != nil {
				return c.position(n, t, it)
			}
			// A computed field name is fine; a number is not: an event is
			// a map at run time, not a list.
			if it.kind != tAny && it.kind != tString {
				c.errorf(n.Property, "cannot index %s (%s) with %s: it is not a list; read a field by name (fields: %s)",
					n.Node, t.name, it.name, joinNames(slices.Sorted(maps.Keys(t.fields))))
			}
		case tInt, tFloat, tBool, tNil:
			c.errorf(n.Property, "cannot index %s: it is %s, not a list or a map", n.Node, t.name)
		}
		return anyT
	}
	switch t.kind {
	case tObject:
		if ft, ok := t.fields[prop.Value]; ok {
			return ft
		}
		names := slices.Sorted(maps.Keys(t.fields))
		if t.unknownField != "" {
			c.errorf(n.Property, t.unknownField+"%s", prop.Value, suggest(prop.Value, names))
			return anyT
		}
		c.errorf(n.Property, "unknown field %s of %s%s (fields: %s)", prop.Value, t.name, suggest(prop.Value, names), joinNames(names))
		return anyT
	case tMap:
		return t.elem
	case tAny, tNil:
		return anyT
	case tList:
		// expr allows list.field only for methods; treat as a mistake.
		c.errorf(n.Property, "cannot read field %s of a list; index it first (x[0].%s) or use map()", prop.Value, prop.Value)
		return anyT
	}
	c.errorf(n.Property, "cannot read field %s of %s", prop.Value, t.name)
	return anyT
}

func (c *checker) call(n *ast.CallNode) *typ {
	args := make([]*typ, len(n.Arguments))
	for i, a := range n.Arguments {
		args[i] = c.typeOf(a)
	}
	id, ok := n.Callee.(*ast.IdentifierNode)
	if !ok {
		c.typeOf(n.Callee)
		return anyT
	}
	rt, known := helperResults[id.Value]
	if !known {
		names := slices.Sorted(maps.Keys(helperResults))
		c.errorf(n, "unknown function %s%s", id.Value, suggest(id.Value, names))
		return anyT
	}
	if want := helperArity[id.Value]; len(args) != want {
		c.errorf(n, "%s takes %d argument(s), got %d", id.Value, want, len(args))
		return rt
	}
	for i, a := range args {
		if a.kind != tAny && !a.numeric() && a.kind != tString {
			c.errorf(n.Arguments[i], "%s: argument %d must be a number or a decimal string, not %s", id.Value, i+1, a.name)
		}
	}
	return rt
}

func (c *checker) binary(n *ast.BinaryNode) *typ {
	l, r := c.typeOf(n.Left), c.typeOf(n.Right)
	known := l.kind != tAny && r.kind != tAny
	switch n.Operator {
	case "and", "&&", "or", "||":
		for _, side := range []struct {
			t *typ
			n ast.Node
		}{{l, n.Left}, {r, n.Right}} {
			if side.t.kind != tAny && side.t.kind != tBool && side.t.kind != tNil {
				c.errorf(side.n, "%s needs booleans, not %s", n.Operator, side.t.name)
			}
		}
		return boolT
	case "==", "!=":
		if known && l.kind != tNil && r.kind != tNil && !comparableTypes(l, r) {
			c.errorf(n, "cannot compare %s with %s using %s", l.name, r.name, n.Operator)
		}
		return boolT
	case "<", "<=", ">", ">=":
		if known && !(l.numeric() && r.numeric()) && !(l.stringy() && r.stringy()) {
			c.errorf(n, "cannot compare %s with %s using %s", l.name, r.name, n.Operator)
		} else if l.kind != tAny && !l.numeric() && !l.stringy() {
			c.errorf(n.Left, "cannot order %s values with %s", l.name, n.Operator)
		} else if r.kind != tAny && !r.numeric() && !r.stringy() {
			c.errorf(n.Right, "cannot order %s values with %s", r.name, n.Operator)
		}
		return boolT
	case "+":
		switch {
		case l.numeric() && r.numeric():
			return arithResult(l, r)
		case l.stringy() && r.stringy():
			// Addresses and hashes are hex strings at run time.
			return stringT
		case l.kind == tList && r.kind == tList:
			return listT(anyT)
		case known:
			c.errorf(n, "cannot add %s and %s", l.name, r.name)
		}
		return anyT
	case "-", "*", "/", "%", "**", "^":
		if (n.Operator == "/" || n.Operator == "%") && isZeroLiteral(n.Right) {
			c.errorf(n, "division by zero: %s", n)
			return anyT
		}
		for _, side := range []struct {
			t *typ
			n ast.Node
		}{{l, n.Left}, {r, n.Right}} {
			if side.t.kind != tAny && !side.t.numeric() {
				c.errorf(side.n, "%s needs numbers, not %s", n.Operator, side.t.name)
				return anyT
			}
		}
		if known {
			return arithResult(l, r)
		}
		return anyT
	case "in", "matches", "contains", "startsWith", "endsWith":
		return boolT
	}
	return anyT
}

// isZeroLiteral reports whether n is the literal 0 (or 0.0).
func isZeroLiteral(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.IntegerNode:
		return n.Value == 0
	case *ast.FloatNode:
		return n.Value == 0
	}
	return false
}

func arithResult(l, r *typ) *typ {
	if l.kind == tFloat || r.kind == tFloat {
		return floatT
	}
	return intT
}

// comparableTypes reports whether == between the two can ever be true.
func comparableTypes(a, b *typ) bool {
	switch {
	case a.numeric() && b.numeric():
		return true
	case a.stringy() && b.stringy():
		return true
	case a.kind == tBool && b.kind == tBool:
		return true
	case (a.kind == tList) && (b.kind == tList):
		return true
	case (a.kind == tObject || a.kind == tMap) && (b.kind == tObject || b.kind == tMap):
		return true
	}
	return false
}

func joinNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > 12 {
		names = append(names[:12:12], "…")
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
