package workflow

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser/lexer"
)

// expr's parser reads integer literals into int64 and rejects larger ones,
// but uint256 constants (2^256-1, a token's max supply) are ordinary in
// workflows. Before parsing, each integer literal that does not fit in
// int64 is swapped for a placeholder identifier of the same length (so
// every position in the expression stays where the user wrote it), and
// bigLiteralPatcher turns each placeholder back into an exact bigint call.

// bigLiteralPrefix starts every placeholder; the rest is padding and an
// index. No rflow variable starts with two underscores.
const bigLiteralPrefix = "__int"

// bigLiterals returns src with its oversized integer literals replaced and
// the placeholder → literal text table (nil when there are none).
func bigLiterals(src string) (string, map[string]string) {
	tokens, err := lexer.Lex(file.NewSource(src))
	if err != nil {
		return src, nil // the parser reports the error itself
	}
	runes := []rune(src)
	var lits map[string]string
	for _, t := range tokens {
		if t.Kind != lexer.Number || t.From < 0 || t.To > len(runes) || t.From >= t.To {
			continue
		}
		text := string(runes[t.From:t.To])
		if text != t.Value {
			continue // the lexer's offsets are not what we think: leave it to the parser
		}
		b, err := parseInteger(text)
		if err != nil || b.IsInt64() || strings.HasPrefix(text, "+") || strings.HasPrefix(text, "-") {
			continue
		}
		if lits == nil {
			lits = map[string]string{}
		}
		id := fmt.Sprintf("%s%d", bigLiteralPrefix, len(lits))
		if len(id) > len(text) {
			continue // cannot happen: an oversized literal has at least 16 characters
		}
		id += strings.Repeat("_", len(text)-len(id))
		lits[id] = b.String()
		copy(runes[t.From:t.To], []rune(id))
	}
	if lits == nil {
		return src, nil
	}
	return string(runes), lits
}

// bigLiteralPatcher replaces the placeholders bigLiterals made with
// bigint('<decimal>'), which builds a fresh *big.Int on every evaluation
// (a shared constant could be changed by a caller holding the result).
type bigLiteralPatcher struct{ lits map[string]string }

func (p bigLiteralPatcher) Visit(node *ast.Node) {
	id, ok := (*node).(*ast.IdentifierNode)
	if !ok {
		return
	}
	text, ok := p.lits[id.Value]
	if !ok {
		return
	}
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: "bigint"}, Arguments: []ast.Node{&ast.StringNode{Value: text}}}
	call.SetLocation(id.Location())
	call.Callee.SetLocation(id.Location())
	call.Arguments[0].SetLocation(id.Location())
	ast.Patch(node, call)
}
