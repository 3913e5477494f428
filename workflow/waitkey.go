package workflow

import (
	"math/big"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// WaitKey is an equality a wait_for where requires of the awaited event:
// event.<Field> == Value, where Value does not read the event. The engine
// evaluates Value when the wait parks and indexes the wait under
// IndexValue of it, so a log finds its waits by one lookup per field
// instead of testing every parked where.
type WaitKey struct {
	Field string
	Value *Expr
}

// waitKeys finds the equalities `event.f == x` (either way round) among the
// top-level && terms of where.
func waitKeys(where *Expr) []WaitKey {
	if where == nil {
		return nil
	}
	parsed, lits := bigLiterals(where.src)
	tree, err := safeExprParse(parsed)
	if err != nil {
		return nil
	}
	if where.positions != nil {
		// Sides are compiled from their text: read positions by name first.
		ast.Walk(&tree.Node, positionPatcher{where.positions})
	}
	var keys []WaitKey
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		b, ok := n.(*ast.BinaryNode)
		if !ok {
			return
		}
		switch b.Operator {
		case "&&", "and":
			walk(b.Left)
			walk(b.Right)
		case "==":
			for _, side := range [][2]ast.Node{{b.Left, b.Right}, {b.Right, b.Left}} {
				field, ok := eventField(side[0])
				if !ok || readsEvent(side[1]) {
					continue
				}
				prog, err := safeCompile(side[1].String(), lits, nil)
				if err != nil {
					continue
				}
				keys = append(keys, WaitKey{Field: field, Value: &Expr{src: side[1].String(), pos: where.pos, prog: prog}})
				break
			}
		}
	}
	walk(tree.Node)
	return keys
}

// eventField reports whether n is event.<field> (or event["field"]).
func eventField(n ast.Node) (string, bool) {
	m, ok := n.(*ast.MemberNode)
	if !ok || m.Optional {
		return "", false
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok || id.Value != "event" {
		return "", false
	}
	s, ok := m.Property.(*ast.StringNode)
	if !ok {
		return "", false
	}
	return s.Value, true
}

func readsEvent(n ast.Node) bool {
	v := &eventFinder{}
	ast.Walk(&n, v)
	return v.found
}

type eventFinder struct{ found bool }

func (f *eventFinder) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok && id.Value == "event" {
		f.found = true
	}
}

// IndexValue is the form under which a value is indexed for wait matching:
// two values == holds for have the same form. ok is false for values that
// have none (a fractional number, a list, a map, nil): a wait keyed on one
// is then tested against every log of its event.
func IndexValue(v any) (string, bool) {
	v = hexForm(v)
	if n, ok := toNumber(v); ok {
		if !n.isFloat {
			return "n:" + n.i.String(), true
		}
		f := new(big.Float).SetFloat64(n.f)
		if !f.IsInt() {
			return "", false
		}
		i, _ := f.Int(nil)
		return "n:" + i.String(), true
	}
	switch v := v.(type) {
	case string:
		if isHex(v) {
			return "h:" + strings.ToLower(v), true
		}
		return "s:" + v, true
	case bool:
		if v {
			return "b:true", true
		}
		return "b:false", true
	}
	return "", false
}
