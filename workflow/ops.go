package workflow

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/expr-lang/expr/vm/runtime"
	"github.com/holiman/uint256"

	"github.com/rflow-dev/rflow/units"
)

// Arithmetic and comparisons in expressions go through the functions in this
// file instead of expr's built-in operators, so uint256 values (*big.Int)
// mix with plain integers and stay exact: no value ever passes through
// float64 unless the expression itself wrote a fraction.
//
// Integer results are int when they fit and *big.Int otherwise, so the same
// expression gives the same answer on a freshly decoded event (*big.Int
// fields) and on one read back from the journal (int64 or *big.Int).

// maxBits caps the size of any integer an expression computes, so a hostile
// expression cannot allocate without bound (2 ** 2 ** 40).
const maxBits = 4096

var errTooLarge = fmt.Errorf("integer result exceeds %d bits", maxBits)

// number is a numeric operand: exactly one of i or f is meaningful.
type number struct {
	i       *big.Int
	f       float64
	isFloat bool
}

// toNumber converts any Go number, *big.Int, uint256.Int or json-ish number
// into a number.
func toNumber(v any) (number, bool) {
	switch v := v.(type) {
	case int:
		return number{i: big.NewInt(int64(v))}, true
	case int8:
		return number{i: big.NewInt(int64(v))}, true
	case int16:
		return number{i: big.NewInt(int64(v))}, true
	case int32:
		return number{i: big.NewInt(int64(v))}, true
	case int64:
		return number{i: big.NewInt(v)}, true
	case uint:
		return number{i: new(big.Int).SetUint64(uint64(v))}, true
	case uint8:
		return number{i: big.NewInt(int64(v))}, true
	case uint16:
		return number{i: big.NewInt(int64(v))}, true
	case uint32:
		return number{i: big.NewInt(int64(v))}, true
	case uint64:
		return number{i: new(big.Int).SetUint64(v)}, true
	case *big.Int:
		if v == nil {
			return number{}, false
		}
		return number{i: v}, true
	case big.Int:
		return number{i: &v}, true
	case *uint256.Int:
		if v == nil {
			return number{}, false
		}
		return number{i: v.ToBig()}, true
	case float64:
		return number{f: v, isFloat: true}, true
	case float32:
		return number{f: float64(v), isFloat: true}, true
	}
	return number{}, false
}

// intResult returns i as int when it fits, else as *big.Int.
func intResult(i *big.Int) (any, error) {
	if i.BitLen() > maxBits {
		return nil, errTooLarge
	}
	if i.IsInt64() && i.Int64() >= math.MinInt && i.Int64() <= math.MaxInt {
		return int(i.Int64()), nil
	}
	return i, nil
}

// maxExactFloatInt is 2^53: integers up to it convert to float64 exactly.
var maxExactFloatInt = new(big.Int).Lsh(big.NewInt(1), 53)

// asFloat converts a number to float64, refusing integers that would lose
// precision: a uint256 amount must never be rounded silently.
func asFloat(n number) (float64, error) {
	if n.isFloat {
		return n.f, nil
	}
	if new(big.Int).Abs(n.i).Cmp(maxExactFloatInt) > 0 {
		return 0, fmt.Errorf("cannot mix the integer %s with a fractional number without losing precision; use integer math (ether(), units()) instead", n.i)
	}
	f, _ := new(big.Float).SetInt(n.i).Float64()
	return f, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case *big.Int, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, *uint256.Int:
		return "integer"
	case float64, float32:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

func opArith(op string, a, b any) (any, error) {
	a, b = hexForm(a), hexForm(b)
	x, okx := toNumber(a)
	y, oky := toNumber(b)
	if !okx || !oky {
		if op == "+" {
			if sa, ok := a.(string); ok {
				if sb, ok := b.(string); ok {
					return sa + sb, nil
				}
			}
			la, oka := a.([]any)
			lb, okb := b.([]any)
			if oka && okb {
				return append(append(make([]any, 0, len(la)+len(lb)), la...), lb...), nil
			}
		}
		return exprRuntime(op, a, b)
	}
	if x.isFloat || y.isFloat {
		fx, err := asFloat(x)
		if err != nil {
			return nil, err
		}
		fy, err := asFloat(y)
		if err != nil {
			return nil, err
		}
		switch op {
		case "+":
			return fx + fy, nil
		case "-":
			return fx - fy, nil
		case "*":
			return fx * fy, nil
		case "/":
			if fy == 0 {
				return nil, errors.New("division by zero")
			}
			return fx / fy, nil
		case "%":
			if fy == 0 {
				return nil, errors.New("division by zero")
			}
			return math.Mod(fx, fy), nil
		case "**":
			return math.Pow(fx, fy), nil
		}
		return nil, fmt.Errorf("unknown operator %s", op)
	}
	r := new(big.Int)
	switch op {
	case "+":
		r.Add(x.i, y.i)
	case "-":
		r.Sub(x.i, y.i)
	case "*":
		if x.i.BitLen()+y.i.BitLen() > maxBits+1 {
			return nil, errTooLarge
		}
		r.Mul(x.i, y.i)
	case "/":
		// Integer division truncates toward zero, like Solidity.
		if y.i.Sign() == 0 {
			return nil, errors.New("division by zero")
		}
		r.Quo(x.i, y.i)
	case "%":
		if y.i.Sign() == 0 {
			return nil, errors.New("division by zero")
		}
		r.Rem(x.i, y.i)
	case "**":
		if y.i.Sign() < 0 {
			return nil, errors.New("negative exponent in integer power")
		}
		switch {
		case y.i.Sign() == 0:
			r.SetInt64(1)
		case x.i.Sign() == 0 || x.i.CmpAbs(big.NewInt(1)) == 0:
			// 0, 1 and -1 stay small for any exponent: only its parity matters.
			r.Exp(x.i, big.NewInt(int64(2-y.i.Bit(0))), nil)
		case y.i.Cmp(big.NewInt(maxBits)) > 0 || int64(x.i.BitLen()-1)*y.i.Int64() > maxBits:
			return nil, errTooLarge
		default:
			r.Exp(x.i, y.i, nil)
		}
	default:
		return nil, fmt.Errorf("unknown operator %s", op)
	}
	return intResult(r)
}

// compare returns -1, 0 or 1 for two numbers or two strings.
func compare(a, b any) (int, error) {
	a, b = hexForm(a), hexForm(b)
	x, okx := toNumber(a)
	y, oky := toNumber(b)
	if okx && oky {
		if !x.isFloat && !y.isFloat {
			return x.i.Cmp(y.i), nil
		}
		if math.IsNaN(x.f) || math.IsNaN(y.f) {
			return 0, errors.New("cannot compare NaN")
		}
		return bigFloat(x).Cmp(bigFloat(y)), nil
	}
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			return strings.Compare(sa, sb), nil
		}
	}
	if okx || oky {
		return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
	}
	// Times and durations keep expr's own semantics.
	less, err := exprRuntime("<", a, b)
	if err != nil {
		return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
	}
	if less == true {
		return -1, nil
	}
	if equal(a, b) {
		return 0, nil
	}
	return 1, nil
}

// exprRuntime applies expr's built-in operator to values rflow's exact
// arithmetic does not handle (times, durations), turning its panics into
// errors. Numbers never reach it.
func exprRuntime(op string, a, b any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("invalid operation: %s %s %s", typeName(a), op, typeName(b))
		}
	}()
	switch op {
	case "+":
		return runtime.Add(a, b), nil
	case "-":
		return runtime.Subtract(a, b), nil
	case "*":
		return runtime.Multiply(a, b), nil
	case "<":
		return runtime.Less(a, b), nil
	case "==":
		return runtime.Equal(a, b), nil
	}
	return nil, fmt.Errorf("invalid operation: %s %s %s", typeName(a), op, typeName(b))
}

func bigFloat(n number) *big.Float {
	if n.isFloat {
		return new(big.Float).SetFloat64(n.f)
	}
	return new(big.Float).SetInt(n.i)
}

// equal compares two values. Numbers compare by value whatever their Go
// type; addresses and hashes compare as hex, ignoring checksum case.
func equal(a, b any) bool {
	a, b = hexForm(a), hexForm(b)
	if a == nil || b == nil {
		return isNil(a) && isNil(b)
	}
	if x, ok := toNumber(a); ok {
		y, ok := toNumber(b)
		if !ok {
			return false
		}
		if !x.isFloat && !y.isFloat {
			return x.i.Cmp(y.i) == 0
		}
		return bigFloat(x).Cmp(bigFloat(y)) == 0
	}
	if sa, ok := a.(string); ok {
		sb, ok := b.(string)
		if !ok {
			return false
		}
		if sa == sb {
			return true
		}
		return len(sa) == len(sb) && isHex(sa) && isHex(sb) && strings.EqualFold(sa, sb)
	}
	la, oka := a.([]any)
	lb, okb := b.([]any)
	if oka && okb {
		if len(la) != len(lb) {
			return false
		}
		for i := range la {
			if !equal(la[i], lb[i]) {
				return false
			}
		}
		return true
	}
	ma, oka := a.(map[string]any)
	mb, okb := b.(map[string]any)
	if oka && okb {
		if len(ma) != len(mb) {
			return false
		}
		for k, v := range ma {
			w, ok := mb[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	if r, err := exprRuntime("==", a, b); err == nil {
		return r == true
	}
	return reflect.DeepEqual(a, b)
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// hexForm turns addresses, hashes and byte strings into the 0x-hex strings
// they become in the journal.
func hexForm(v any) any {
	switch v := v.(type) {
	case common.Address:
		return v.Hex()
	case *common.Address:
		if v == nil {
			return nil
		}
		return v.Hex()
	case common.Hash:
		return v.Hex()
	case []byte:
		return "0x" + hex.EncodeToString(v)
	}
	return v
}

func isHex(s string) bool {
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return false
	}
	for _, c := range s[2:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// operatorFuncs maps each operator rewritten by opPatcher to its function
// name in expressions.
var operatorFuncs = map[string]string{
	"+": "__add", "-": "__sub", "*": "__mul", "/": "__div", "%": "__mod", "**": "__pow", "^": "__pow",
	"<": "__lt", "<=": "__le", ">": "__gt", ">=": "__ge", "==": "__eq", "!=": "__ne",
}

func arith(op string) func(params ...any) (any, error) {
	return func(p ...any) (any, error) {
		if len(p) != 2 {
			return nil, fmt.Errorf("operator %s needs two operands", op)
		}
		return opArith(op, p[0], p[1])
	}
}

func cmpFunc(test func(int) bool) func(params ...any) (any, error) {
	return func(p ...any) (any, error) {
		if len(p) != 2 {
			return nil, errors.New("comparison needs two operands")
		}
		c, err := compare(p[0], p[1])
		if err != nil {
			return nil, err
		}
		return test(c), nil
	}
}

func negate(p ...any) (any, error) {
	if len(p) != 1 {
		return nil, errors.New("negation needs one operand")
	}
	n, ok := toNumber(p[0])
	if !ok {
		return nil, fmt.Errorf("invalid operation: -%s", typeName(p[0]))
	}
	if n.isFloat {
		return -n.f, nil
	}
	return intResult(new(big.Int).Neg(n.i))
}

func plus(p ...any) (any, error) {
	if len(p) != 1 {
		return nil, errors.New("unary + needs one operand")
	}
	n, ok := toNumber(p[0])
	if !ok {
		return nil, fmt.Errorf("invalid operation: +%s", typeName(p[0]))
	}
	if n.isFloat {
		return n.f, nil
	}
	return intResult(n.i)
}

// decimalText renders an argument of ether/gwei/units as decimal text.
func decimalText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return "", fmt.Errorf("%v is not a finite number", v)
		}
		return big.NewFloat(v).Text('f', -1), nil
	}
	n, ok := toNumber(v)
	if !ok {
		return "", fmt.Errorf("%s is not a number", typeName(v))
	}
	if n.isFloat {
		return decimalText(n.f)
	}
	return n.i.String(), nil
}

// unitsOf implements units(x, decimals): x scaled by 10^decimals, exactly.
func unitsOf(x any, decimals any) (any, error) {
	d, ok := toNumber(decimals)
	if !ok || d.isFloat || !d.i.IsInt64() {
		return nil, fmt.Errorf("units: decimals must be an integer, got %s", typeName(decimals))
	}
	s, err := decimalText(x)
	if err != nil {
		return nil, fmt.Errorf("units: %w", err)
	}
	r, err := units.Parse(s, int(d.i.Int64()))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// formatUnits implements format_units(x, decimals): the decimal text of
// x / 10^decimals ("1.5" for format_units(ether('1.5'), 18)).
func formatUnits(x any, decimals any) (string, error) {
	i, err := ToBigInt(x)
	if err != nil {
		return "", fmt.Errorf("format_units: %w", err)
	}
	d, ok := toNumber(decimals)
	if !ok || d.isFloat || !d.i.IsInt64() || d.i.Int64() < 0 || d.i.Int64() > 77 {
		return "", errors.New("format_units: decimals must be an integer in 0..77")
	}
	return units.Decimal(i, int(d.i.Int64())), nil
}

// parseAmount parses "5 ether", "20 gwei", "1000 wei" or a plain integer
// into wei (used by budget caps and ToBigInt).
func parseAmount(s string) (*big.Int, error) {
	fields := strings.Fields(s)
	switch len(fields) {
	case 1:
		return units.Parse(fields[0], 0)
	case 2:
		dec, ok := map[string]int{"wei": 0, "gwei": 9, "ether": 18, "eth": 18}[strings.ToLower(fields[1])]
		if !ok {
			return nil, fmt.Errorf("unknown unit %q (use wei, gwei or ether)", fields[1])
		}
		return units.Parse(fields[0], dec)
	}
	return nil, fmt.Errorf("%q is not an amount like \"5 ether\"", s)
}
