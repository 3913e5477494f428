package ozimport

import (
	"fmt"
	"strconv"
	"strings"
)

// This file parses OpenZeppelin Monitor's match_conditions expression
// language, following the grammar of its parser
// (src/services/filter/expression/parsing.rs):
//
//	expression := and { OR and }          AND binds tighter than OR
//	and        := term { AND term }
//	term       := "(" expression ")" | condition
//	condition  := lhs operator value
//	lhs        := base { "[" digits "]" | "." key }
//	operator   := == != > >= < <= contains starts_with ends_with
//	value      := 'quoted' | "quoted" | true | false | 0xhex | number | unquoted
//
// Keywords (AND, OR, true, false, contains, starts_with, ends_with) are
// case-insensitive; names are case-sensitive.

// Bounds on what the parser reads, so hostile input costs little.
const (
	maxExpressionLen   = 8 << 10
	maxExpressionDepth = 64
)

type exprNode interface{ isNode() }

// logical is a AND b, or a OR b.
type logical struct {
	and         bool
	left, right exprNode
}

// condition is one comparison: lhs op value.
type condition struct {
	base   string
	path   []accessor
	op     string // ==, !=, >, >=, <, <=, contains, starts_with, ends_with
	value  literal
	column int // 1-based column of lhs in the source
}

// accessor is [index] or .key on the left-hand side.
type accessor struct {
	index   int
	key     string
	isIndex bool
}

type literalKind int

const (
	litString   literalKind = iota // 'quoted', "quoted" or unquoted
	litBool                        // true, false
	litNumber                      // 123, -4, 1.5
	litHex                         // 0xabc (Monitor treats it as a string)
	litUnquoted                    // active (a string, written bare)
)

type literal struct {
	kind literalKind
	text string // unescaped for strings; as written otherwise
}

func (logical) isNode()   {}
func (condition) isNode() {}

// parseExpression parses a Monitor expression into its tree.
func parseExpression(src string) (exprNode, error) {
	if len(src) > maxExpressionLen {
		return nil, fmt.Errorf("expression is %d bytes, more than %d", len(src), maxExpressionLen)
	}
	p := &exprParser{src: src}
	n, err := p.or(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.src) {
		return nil, p.errorf("unexpected %q", p.rest(12))
	}
	return n, nil
}

type exprParser struct {
	src string
	pos int
}

func (p *exprParser) errorf(format string, args ...any) error {
	return fmt.Errorf("column %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

func (p *exprParser) rest(n int) string {
	r := p.src[p.pos:]
	if len(r) > n {
		r = r[:n] + "…"
	}
	return r
}

func (p *exprParser) space() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
}

// keyword consumes word (case-insensitive) when it stands alone.
func (p *exprParser) keyword(word string) bool {
	p.space()
	end := p.pos + len(word)
	if end > len(p.src) || !strings.EqualFold(p.src[p.pos:end], word) {
		return false
	}
	if end < len(p.src) && isWordByte(p.src[end]) {
		return false
	}
	p.pos = end
	return true
}

func (p *exprParser) or(depth int) (exprNode, error) {
	left, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.keyword("OR") {
		right, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		left = logical{and: false, left: left, right: right}
	}
	return left, nil
}

func (p *exprParser) and(depth int) (exprNode, error) {
	left, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for p.keyword("AND") {
		right, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		left = logical{and: true, left: left, right: right}
	}
	return left, nil
}

func (p *exprParser) term(depth int) (exprNode, error) {
	p.space()
	if p.pos < len(p.src) && p.src[p.pos] == '(' {
		if depth >= maxExpressionDepth {
			return nil, p.errorf("parentheses nested deeper than %d", maxExpressionDepth)
		}
		p.pos++
		n, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		p.space()
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			return nil, p.errorf("expected a closing parenthesis ')'")
		}
		p.pos++
		return n, nil
	}
	return p.condition()
}

func (p *exprParser) condition() (exprNode, error) {
	p.space()
	c := condition{column: p.pos + 1}
	base := p.word()
	if base == "" {
		if p.pos >= len(p.src) {
			return nil, p.errorf("expected a condition (name operator value), got the end of the expression")
		}
		return nil, p.errorf("expected a condition (name operator value), got %q", p.rest(12))
	}
	if isKeyword(base) {
		p.pos -= len(base)
		return nil, p.errorf("%q is a keyword, not a name", base)
	}
	c.base = base
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '[':
			p.pos++
			start := p.pos
			for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
				p.pos++
			}
			if start == p.pos || p.pos >= len(p.src) || p.src[p.pos] != ']' {
				return nil, p.errorf("expected an index like [0]")
			}
			i, err := strconv.Atoi(p.src[start:p.pos])
			if err != nil || i > 1<<20 {
				return nil, p.errorf("index %s is too large", p.src[start:p.pos])
			}
			p.pos++
			c.path = append(c.path, accessor{index: i, isIndex: true})
			continue
		case '.':
			p.pos++
			k := p.word()
			if k == "" {
				return nil, p.errorf("expected a key after '.'")
			}
			c.path = append(c.path, accessor{key: k})
			continue
		}
		break
	}
	op, err := p.operator()
	if err != nil {
		return nil, err
	}
	c.op = op
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	c.value = v
	return c, nil
}

func (p *exprParser) word() string {
	start := p.pos
	for p.pos < len(p.src) && isWordByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *exprParser) operator() (string, error) {
	p.space()
	for _, kw := range []string{"contains", "starts_with", "ends_with"} {
		if p.keyword(kw) {
			return kw, nil
		}
	}
	for _, op := range []string{">=", "<=", "==", "!=", ">", "<"} {
		if strings.HasPrefix(p.src[p.pos:], op) {
			p.pos += len(op)
			return op, nil
		}
	}
	if p.pos >= len(p.src) {
		return "", p.errorf("expected an operator (==, !=, >, >=, <, <=, contains, starts_with, ends_with), got the end of the expression")
	}
	return "", p.errorf("expected an operator (==, !=, >, >=, <, <=, contains, starts_with, ends_with), got %q", p.rest(12))
}

func (p *exprParser) value() (literal, error) {
	p.space()
	if p.pos >= len(p.src) {
		return literal{}, p.errorf("expected a value after the operator")
	}
	if q := p.src[p.pos]; q == '\'' || q == '"' {
		return p.quoted(q)
	}
	start := p.pos
	for p.pos < len(p.src) && (isWordByte(p.src[p.pos]) || strings.IndexByte("+-.", p.src[p.pos]) >= 0) {
		p.pos++
	}
	w := p.src[start:p.pos]
	switch {
	case w == "":
		return literal{}, p.errorf("expected a value, got %q", p.rest(12))
	case strings.EqualFold(w, "true") || strings.EqualFold(w, "false"):
		return literal{kind: litBool, text: strings.ToLower(w)}, nil
	case isHexLiteral(w):
		return literal{kind: litHex, text: w}, nil
	case isNumberLiteral(w):
		return literal{kind: litNumber, text: w}, nil
	case isKeyword(w):
		p.pos = start
		return literal{}, p.errorf("%q is a keyword, not a value; quote it as '%s'", w, w)
	case strings.Contains(w, ".") || strings.Contains(w, "+"):
		p.pos = start
		return literal{}, p.errorf("value %q is neither a number nor a name; quote it", w)
	}
	return literal{kind: litUnquoted, text: w}, nil
}

// quoted reads a string in q quotes; \q and \\ are its only escapes.
func (p *exprParser) quoted(q byte) (literal, error) {
	start := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == q:
			p.pos++
			return literal{kind: litString, text: b.String()}, nil
		case c == '\\' && p.pos+1 < len(p.src) && (p.src[p.pos+1] == q || p.src[p.pos+1] == '\\'):
			b.WriteByte(p.src[p.pos+1])
			p.pos += 2
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	p.pos = start
	return literal{}, p.errorf("string has no closing quote %c", q)
}

func isWordByte(c byte) bool {
	return c == '_' || isDigit(c) || (c|0x20) >= 'a' && (c|0x20) <= 'z'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isKeyword(w string) bool {
	switch strings.ToLower(w) {
	case "true", "false", "and", "or", "contains", "starts_with", "ends_with":
		return true
	}
	return false
}

func isHexLiteral(w string) bool {
	if len(w) < 3 || w[0] != '0' || (w[1] != 'x' && w[1] != 'X') {
		return false
	}
	for i := 2; i < len(w); i++ {
		c := w[i] | 0x20
		if !isDigit(w[i]) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isNumberLiteral is [+-]digits[.digits], Monitor's numeric literal.
func isNumberLiteral(w string) bool {
	s := strings.TrimLeft(w, "+-")
	if len(w)-len(s) > 1 {
		return false
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	return allDigits(whole) && (!hasFrac || allDigits(frac))
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
