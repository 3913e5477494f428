package workflow

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

// PackCall evaluates args and ABI-encodes a call to m (selector included):
// the calldata of a send with function: or of a read trigger. Values are
// converted the way expressions produce them (int, int64, *big.Int, decimal
// or hex strings, 0x addresses, lists, maps for tuples).
func PackCall(m *abi.Method, args []*Value, env Env) ([]byte, error) {
	if m == nil {
		return nil, errors.New("pack call: no ABI method")
	}
	if len(args) != len(m.Inputs) {
		return nil, fmt.Errorf("pack call %s: %d argument(s) for %d input(s)", m.Name, len(args), len(m.Inputs))
	}
	vals := make([]any, len(args))
	for i, a := range args {
		v, err := a.Eval(env)
		if err != nil {
			return nil, err
		}
		if vals[i], err = convertArg(v, m.Inputs[i].Type); err != nil {
			return nil, fmt.Errorf("%s: argument %d (%s) of %s: %w", a.pos, i+1, m.Inputs[i].Type, m.Name, err)
		}
	}
	data, err := m.Inputs.Pack(vals...)
	if err != nil {
		return nil, fmt.Errorf("pack call %s: %w", m.Name, err)
	}
	return append(append([]byte{}, m.ID...), data...), nil
}

// Calldata returns the ABI-encoded call of a send with function:, or nil
// for a plain transfer (whose Data, if any, is a separate Value).
func (s *Send) Calldata(env Env) ([]byte, error) {
	if s.ABIMethod == nil {
		return nil, nil
	}
	return PackCall(s.ABIMethod, s.Args, env)
}

// Calldata returns the ABI-encoded view call of a read trigger.
func (r *ReadTrigger) Calldata(env Env) ([]byte, error) { return PackCall(r.ABIMethod, r.Args, env) }

// ABIValue converts v (a value as expressions produce it: *big.Int, int,
// decimal or hex strings, 0x hex, bools, lists, maps for tuples) into the Go
// type go-ethereum's ABI packer expects for t, or says why it cannot.
func ABIValue(v any, t abi.Type) (any, error) { return convertArg(v, t) }

// convertArg converts an expression value into the Go type go-ethereum's
// ABI packer expects for t.
func convertArg(v any, t abi.Type) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("cannot convert to %s (%v)", t, r)
		}
	}()
	v = hexForm(v)
	switch t.T {
	case abi.IntTy, abi.UintTy:
		i, err := ToBigInt(v)
		if err != nil {
			return nil, err
		}
		if t.T == abi.UintTy && (i.Sign() < 0 || i.BitLen() > t.Size) {
			return nil, fmt.Errorf("%s does not fit in %s", i, t)
		}
		if t.T == abi.IntTy {
			limit := new(big.Int).Lsh(big.NewInt(1), uint(t.Size-1))
			if i.Cmp(limit) >= 0 || i.Cmp(new(big.Int).Neg(limit)) < 0 {
				return nil, fmt.Errorf("%s does not fit in %s", i, t)
			}
		}
		gt := t.GetType()
		if gt == reflect.TypeOf(&big.Int{}) {
			return i, nil
		}
		if t.T == abi.UintTy {
			return reflect.ValueOf(i.Uint64()).Convert(gt).Interface(), nil
		}
		return reflect.ValueOf(i.Int64()).Convert(gt).Interface(), nil
	case abi.AddressTy:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want an address, got %s", typeName(v))
		}
		return parseAddress(s)
	case abi.BoolTy:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want a bool, got %s", typeName(v))
		}
		return b, nil
	case abi.StringTy:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a string, got %s", typeName(v))
		}
		return s, nil
	case abi.BytesTy, abi.FixedBytesTy, abi.HashTy, abi.FunctionTy:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want 0x-hex bytes, got %s", typeName(v))
		}
		b, err := decodeHex(s)
		if err != nil {
			return nil, err
		}
		if t.T == abi.BytesTy {
			return b, nil
		}
		gt := t.GetType()
		if len(b) != gt.Len() {
			return nil, fmt.Errorf("want %d bytes, got %d", gt.Len(), len(b))
		}
		arr := reflect.New(gt).Elem()
		reflect.Copy(arr, reflect.ValueOf(b))
		return arr.Interface(), nil
	case abi.SliceTy, abi.ArrayTy:
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("want a list, got %s", typeName(v))
		}
		if t.T == abi.ArrayTy && len(items) != t.Size {
			return nil, fmt.Errorf("want %d items, got %d", t.Size, len(items))
		}
		gt := t.GetType()
		var out reflect.Value
		if t.T == abi.ArrayTy {
			out = reflect.New(gt).Elem()
		} else {
			out = reflect.MakeSlice(gt, len(items), len(items))
		}
		for i, it := range items {
			c, err := convertArg(it, *t.Elem)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			out.Index(i).Set(reflect.ValueOf(c))
		}
		return out.Interface(), nil
	case abi.TupleTy:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("want a map for a tuple, got %s", typeName(v))
		}
		out := reflect.New(t.GetType()).Elem()
		for i, name := range t.TupleRawNames {
			fv, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("tuple field %s missing", name)
			}
			c, err := convertArg(fv, *t.TupleElems[i])
			if err != nil {
				return nil, fmt.Errorf("tuple field %s: %w", name, err)
			}
			out.Field(i).Set(reflect.ValueOf(c))
		}
		return out.Interface(), nil
	}
	return nil, fmt.Errorf("unsupported ABI type %s", t)
}
