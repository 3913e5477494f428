package workflow

import (
	"github.com/expr-lang/expr/ast"
)

// A contract read with several outputs is an object by name at run time
// ({"reserve0": …, "reserve1": …}, unnamed outputs as arg<i>), and reads
// as users of ethers' Result and viem write it: result.reserve0, or
// result[0] by position. The position is resolved when the expression is
// compiled, from the ABI's order of the outputs (typ.order), into a read
// by name: the value, the journal and request bodies stay one object.

// position types x[i] on an object whose fields have positions: i must be
// a constant position within them (reported at i otherwise), or a computed
// field name.
func (c *checker) position(n *ast.MemberNode, t *typ, it *typ) *typ {
	if k, ok := n.Property.(*ast.IntegerNode); ok {
		if k.Value < 0 || k.Value >= len(t.order) {
			c.errorf(n.Property, "index %d is out of range: %s has %d values (0 to %d: %s)",
				k.Value, t.name, len(t.order), len(t.order)-1, joinNames(t.order))
			return anyT
		}
		if c.positions == nil {
			c.positions = map[int]string{}
		}
		name := t.order[k.Value]
		c.positions[k.Location().From] = name
		return t.fields[name]
	}
	if it.kind == tInt || it.kind == tFloat {
		c.errorf(n.Property, "index %s (%s) by a constant position (0 to %d) or by name (%s)",
			n.Node, t.name, len(t.order)-1, joinNames(t.order))
	}
	return anyT
}

// positionPatcher rewrites each x[i] the checker resolved (positions, by
// the offset of i) into x["name"].
type positionPatcher struct{ positions map[int]string }

func (p positionPatcher) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok {
		return
	}
	k, ok := m.Property.(*ast.IntegerNode)
	if !ok {
		return
	}
	if name, ok := p.positions[k.Location().From]; ok {
		ast.Patch(&m.Property, &ast.StringNode{Value: name})
	}
}
