package workflow

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Integers written as text (string arguments of sends and reads, bigint(),
// quoted YAML numbers) have one syntax, so '010' means the same thing
// everywhere: an optional sign, then decimal digits or 0x/0X and hex
// digits. Leading zeros are decimal ('010' is 10): there is no octal or
// binary form. An underscore may separate two digits ('1_000'), as in
// expression literals. Spaces around the number are ignored.

// parseInteger parses s with the integer syntax above.
func parseInteger(s string) (*big.Int, error) {
	t := strings.TrimSpace(s)
	neg := false
	if t != "" && (t[0] == '-' || t[0] == '+') {
		neg = t[0] == '-'
		t = t[1:]
	}
	base, digits := 10, t
	if len(t) > 1 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') {
		base, digits = 16, t[2:]
	}
	if !validDigits(digits, base) {
		return nil, fmt.Errorf("%q is not an integer (decimal digits, or 0x and hex digits)", s)
	}
	b, ok := new(big.Int).SetString(strings.ReplaceAll(digits, "_", ""), base)
	if !ok {
		return nil, fmt.Errorf("%q is not an integer (decimal digits, or 0x and hex digits)", s)
	}
	if neg {
		b.Neg(b)
	}
	return b, nil
}

// validDigits reports whether s is digits of base with single underscores
// only between two digits.
func validDigits(s string, base int) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return false
	}
	for _, c := range s {
		switch {
		case c == '_', c >= '0' && c <= '9':
		case base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// isAddressText reports whether s is written like an address: 0x and
// exactly 40 hex digits.
func isAddressText(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) == 42 && isHex(s)
}

// ToBigInt converts a value an expression produced (int, int64, *big.Int,
// an integer string as described above, an amount like "1.5 ether", an
// integral float) into a *big.Int. The engine uses it for send values and
// integer function arguments, so an address ("0x" and 40 hex digits) is an
// error here: it is almost always a mistaken argument, and bigint() turns
// one into a number on purpose.
func ToBigInt(v any) (*big.Int, error) {
	if s, ok := v.(string); ok && isAddressText(s) {
		return nil, fmt.Errorf("%q is an address, not an integer (wrap it in bigint() to use the address as a number)", s)
	}
	return toBigInt(v)
}

// toBigInt is ToBigInt without the address check: the bigint() helper.
func toBigInt(v any) (*big.Int, error) {
	if s, ok := v.(string); ok {
		if b, err := parseInteger(s); err == nil {
			return b, nil
		}
		if b, err := parseAmount(strings.TrimSpace(s)); err == nil {
			return b, nil
		}
		return nil, fmt.Errorf("%q is not an integer (decimal digits, 0x and hex digits, or an amount like \"1.5 ether\")", strings.TrimSpace(s))
	}
	n, ok := toNumber(v)
	if !ok {
		return nil, fmt.Errorf("%s is not an integer", typeName(v))
	}
	if n.isFloat {
		if n.f != math.Trunc(n.f) || math.IsInf(n.f, 0) || math.Abs(n.f) > 1<<53 {
			return nil, fmt.Errorf("%v is not an exact integer", n.f)
		}
		return big.NewInt(int64(n.f)), nil
	}
	return new(big.Int).Set(n.i), nil
}
