package ozimport

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

// TranslateExpression turns a Monitor event condition (e.g. `value > 1000
// AND (from == '0xab…' OR to == '0xab…')`) into an rflow `where:`
// expression over ev's decoded arguments (`event.value > 1000 && (…)`).
//
// Names are ev's inputs, by name or by 0-based position (`2 > 1000` is the
// third input). Monitor compares strings case-insensitively and addresses
// by value, so strings and byte strings compare through lower(). A
// construct rflow cannot express with the same meaning (comparing a whole
// array or tuple to a JSON string, ordering a string) is an error naming
// it, never a guess.
func TranslateExpression(src string, ev abi.Event) (string, error) {
	n, err := parseExpression(src)
	if err != nil {
		return "", err
	}
	return translateNode(n, ev, false)
}

func translateNode(n exprNode, ev abi.Event, inAnd bool) (string, error) {
	switch x := n.(type) {
	case logical:
		l, err := translateNode(x.left, ev, x.and)
		if err != nil {
			return "", err
		}
		r, err := translateNode(x.right, ev, x.and)
		if err != nil {
			return "", err
		}
		op := " || "
		if x.and {
			op = " && "
		}
		s := l + op + r
		if !x.and && inAnd {
			s = "(" + s + ")" // Monitor's parentheses: OR inside AND
		}
		return s, nil
	case condition:
		s, err := translateCondition(x, ev)
		if err != nil {
			return "", fmt.Errorf("column %d: %w", x.column, err)
		}
		return s, nil
	}
	return "", fmt.Errorf("unknown expression node %T", n)
}

func translateCondition(c condition, ev abi.Event) (string, error) {
	in, name, err := eventInput(ev, c.base)
	if err != nil {
		return "", err
	}
	lhs := "event" + fieldRef(name)
	t := in.Type
	where := c.base
	for _, a := range c.path {
		switch {
		case a.isIndex && (t.T == abi.SliceTy || t.T == abi.ArrayTy):
			if t.T == abi.ArrayTy && a.index >= t.Size {
				return "", fmt.Errorf("%s[%d]: %s has %d elements", where, a.index, t.String(), t.Size)
			}
			lhs += fmt.Sprintf("[%d]", a.index)
			where += fmt.Sprintf("[%d]", a.index)
			t = *t.Elem
		case !a.isIndex && t.T == abi.TupleTy:
			i := indexOf(t.TupleRawNames, a.key)
			if i < 0 {
				return "", fmt.Errorf("%s.%s: the tuple has no field %s (fields: %s)", where, a.key, a.key, strings.Join(t.TupleRawNames, ", "))
			}
			lhs += fieldRef(a.key)
			where += "." + a.key
			t = *t.TupleElems[i]
		case a.isIndex:
			return "", fmt.Errorf("%s[%d]: %s is %s, not an array", where, a.index, where, t.String())
		default:
			return "", fmt.Errorf("%s.%s: %s is %s, not a tuple", where, a.key, where, t.String())
		}
	}
	return compare(lhs, where, t, c.op, c.value)
}

// eventInput finds the input a Monitor name refers to and the name rflow
// decodes it under (unnamed inputs are arg0, arg1, …).
func eventInput(ev abi.Event, base string) (abi.Argument, string, error) {
	for i, in := range ev.Inputs {
		if in.Name == base {
			return in, rflowArgName(in, i), nil
		}
	}
	if allDigits(base) {
		i, err := strconv.Atoi(base)
		if err == nil && i < len(ev.Inputs) {
			return ev.Inputs[i], rflowArgName(ev.Inputs[i], i), nil
		}
		return abi.Argument{}, "", fmt.Errorf("argument index %s: %s has %d arguments", base, ev.Sig, len(ev.Inputs))
	}
	names := make([]string, 0, len(ev.Inputs))
	for i, in := range ev.Inputs {
		names = append(names, rflowArgName(in, i))
	}
	return abi.Argument{}, "", fmt.Errorf("%s is not an argument of %s (arguments: %s)", base, ev.Sig, strings.Join(names, ", "))
}

func rflowArgName(in abi.Argument, i int) string {
	if in.Name == "" {
		return fmt.Sprintf("arg%d", i)
	}
	return in.Name
}

// fieldRef is .name, or ['name'] when name is not an identifier.
func fieldRef(name string) string {
	if name != "" && !isDigit(name[0]) && strings.IndexFunc(name, func(r rune) bool { return r > 127 || !isWordByte(byte(r)) }) < 0 {
		return "." + name
	}
	return "[" + exprString(name) + "]"
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// compare renders lhs op value for a value of ABI type t, the way Monitor
// evaluates it for that type (its EVM evaluator picks the comparison by
// the argument's kind).
func compare(lhs, where string, t abi.Type, op string, v literal) (string, error) {
	switch t.T {
	case abi.UintTy, abi.IntTy:
		return compareInteger(lhs, where, t, op, v)
	case abi.AddressTy:
		if op != "==" && op != "!=" {
			return "", fmt.Errorf("%s %s: an address compares only with == and !=", where, op)
		}
		if v.kind == litBool || v.kind == litNumber {
			return "", fmt.Errorf("%s %s %s: an address compares with a quoted 0x address", where, op, v.text)
		}
		return lhs + " " + op + " " + exprString(v.text), nil
	case abi.BoolTy:
		if op != "==" && op != "!=" {
			return "", fmt.Errorf("%s %s: a bool compares only with == and !=", where, op)
		}
		b := strings.ToLower(v.text)
		if b != "true" && b != "false" {
			return "", fmt.Errorf("%s %s %s: a bool compares with true or false", where, op, v.text)
		}
		return lhs + " " + op + " " + b, nil
	case abi.StringTy, abi.BytesTy, abi.FixedBytesTy, abi.HashTy:
		return compareString("lower("+lhs+")", where, op, v)
	case abi.SliceTy, abi.ArrayTy:
		if op != "contains" {
			return "", fmt.Errorf("%s %s: comparing the whole array %s is not translated; compare its elements (%s[0] == …) or use contains", where, op, t.String(), where)
		}
		el, err := compare("#", where+"[…]", *t.Elem, "==", v)
		if err != nil {
			return "", err
		}
		return "any(" + lhs + ", {" + el + "})", nil
	}
	return "", fmt.Errorf("%s is %s: Monitor compares it as text (%s %s …), which has no rflow translation; compare its fields instead", where, t.String(), where, op)
}

func compareInteger(lhs, where string, t abi.Type, op string, v literal) (string, error) {
	switch op {
	case "contains", "starts_with", "ends_with":
		return "", fmt.Errorf("%s %s: %s is a number (%s); use ==, !=, <, <=, >, >=", where, op, where, t.String())
	}
	switch v.kind {
	case litHex:
		return lhs + " " + op + " bigint(" + exprString(v.text) + ")", nil
	case litNumber, litString, litUnquoted:
		n := strings.TrimPrefix(v.text, "+")
		if isHexLiteral(n) {
			return lhs + " " + op + " bigint(" + exprString(n) + ")", nil
		}
		if !isNumberLiteral(n) {
			return "", fmt.Errorf("%s %s %q: %s is a number (%s), the value is not", where, op, v.text, where, t.String())
		}
		if strings.Contains(n, ".") {
			return "", fmt.Errorf("%s %s %s: %s is an integer (%s); Monitor cannot compare it with a fraction either", where, op, v.text, where, t.String())
		}
		if t.T == abi.UintTy && strings.HasPrefix(n, "-") {
			return "", fmt.Errorf("%s %s %s: %s is unsigned (%s)", where, op, v.text, where, t.String())
		}
		i, ok := new(big.Int).SetString(n, 10) // drops leading zeros, which expr would read as octal
		if !ok {
			return "", fmt.Errorf("%s %s %s: not an integer", where, op, v.text)
		}
		if i.BitLen() > 256 {
			return "", fmt.Errorf("%s %s %s: out of range of 256-bit integers, as Monitor finds too", where, op, v.text)
		}
		return lhs + " " + op + " " + i.String(), nil
	}
	return "", fmt.Errorf("%s %s %s: %s is a number (%s)", where, op, v.text, where, t.String())
}

func compareString(lhs, where, op string, v literal) (string, error) {
	s := strings.ToLower(v.text)
	switch op {
	case "==", "!=":
		return lhs + " " + op + " " + exprString(s), nil
	case "contains":
		return lhs + " contains " + exprString(s), nil
	case "starts_with":
		return lhs + " startsWith " + exprString(s), nil
	case "ends_with":
		return lhs + " endsWith " + exprString(s), nil
	}
	return "", fmt.Errorf("%s %s: Monitor orders strings as numbers or not at all; compare text with ==, !=, contains, starts_with or ends_with", where, op)
}

// exprString is s as an expr string literal. "$", "{" and "}" are
// written as \x escapes, so the string can never be read as a ${VAR}
// reference when the project loads, nor end a ${{ }} around it.
func exprString(s string) string {
	return exprEscaper.Replace(strconv.Quote(s))
}

var exprEscaper = strings.NewReplacer("$", `\x24`, "{", `\x7b`, "}", `\x7d`)
