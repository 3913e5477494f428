package workflow

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

// MarshalJSON encodes a value that expressions see (a trigger payload, a
// step output) for the journal: integers of any size, including *big.Int,
// are JSON numbers written exactly; addresses are checksummed 0x-hex
// strings; hashes and byte strings are 0x-hex strings; maps have sorted keys.
// UnmarshalJSON reads the result back into values expressions treat the same.
func MarshalJSON(v any) ([]byte, error) {
	p, err := plain(v, 0)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// MarshalRequestJSON encodes an HTTP request body (http_call and notify):
// as MarshalJSON, except that an integer outside ±(2^53-1) is written as a
// decimal string. JavaScript's JSON.parse (and any receiver decoding into
// a float64) would otherwise round it silently: 2^255+1 arrives as the
// string "57896…969", 42 as the number 42. The journal keeps exact numbers.
func MarshalRequestJSON(v any) ([]byte, error) {
	p, err := plain(v, 0)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jsSafeIntegers(p)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, 2^53-1.
const maxSafeInteger = 1<<53 - 1

// jsSafeIntegers replaces, in plain data, integer numbers a float64 cannot
// hold exactly with their decimal text.
func jsSafeIntegers(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			return v
		}
		if i, err := strconv.ParseInt(s, 10, 64); err == nil && i >= -maxSafeInteger && i <= maxSafeInteger {
			return v
		}
		return s
	case map[string]any:
		for k, e := range v {
			v[k] = jsSafeIntegers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = jsSafeIntegers(e)
		}
	}
	return v
}

// UnmarshalJSON decodes journaled JSON into expression values: objects are
// map[string]any, arrays []any, integers int64 when they fit and *big.Int
// when they do not, other numbers float64. No integer ever passes through
// float64.
func UnmarshalJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode json: unexpected data after the value")
	}
	return fromPlain(v)
}

// Normalize converts a value into exactly what MarshalJSON followed by
// UnmarshalJSON would produce (for example an ABI-decoded event into journal
// form), so callers can build an Env that behaves like a recovered one.
func Normalize(v any) (any, error) {
	p, err := plain(v, 0)
	if err != nil {
		return nil, err
	}
	return fromPlain(p)
}

func fromPlain(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		return decodeNumber(string(v))
	case map[string]any:
		for k, e := range v {
			d, err := fromPlain(e)
			if err != nil {
				return nil, err
			}
			v[k] = d
		}
		return v, nil
	case []any:
		for i, e := range v {
			d, err := fromPlain(e)
			if err != nil {
				return nil, err
			}
			v[i] = d
		}
		return v, nil
	}
	return v, nil
}

func decodeNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return b, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("decode number %s: %w", s, err)
	}
	return f, nil
}

// plain converts v into JSON-ready data: nil, bool, string, json.Number,
// []any and map[string]any.
func plain(v any, depth int) (any, error) {
	if depth > 1000 {
		return nil, fmt.Errorf("value nested too deeply")
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case bool, string:
		return v, nil
	case json.Number:
		if _, err := decodeNumber(string(v)); err != nil {
			return nil, err
		}
		return v, nil
	case Secret:
		return v.String(), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("cannot encode %v as JSON", v)
		}
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil
	case float32:
		return plain(float64(v), depth)
	case common.Address:
		return v.Hex(), nil
	case *common.Address:
		if v == nil {
			return nil, nil
		}
		return v.Hex(), nil
	case common.Hash:
		return v.Hex(), nil
	case []byte:
		return "0x" + hex.EncodeToString(v), nil
	case *uint256.Int:
		if v == nil {
			return nil, nil
		}
		return json.Number(v.Dec()), nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			p, err := plain(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			p, err := plain(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	}
	if n, ok := toNumber(v); ok {
		return json.Number(n.i.String()), nil
	}
	return plainReflect(reflect.ValueOf(v), depth)
}

func plainReflect(rv reflect.Value, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return plain(rv.Elem().Interface(), depth+1)
	case reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return "0x" + hex.EncodeToString(b), nil
		}
		fallthrough
	case reflect.Slice:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return "0x" + hex.EncodeToString(rv.Bytes()), nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			p, err := plain(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("cannot encode a map keyed by %s", rv.Type().Key())
		}
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			p, err := plain(iter.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[iter.Key().String()] = p
		}
		return out, nil
	case reflect.Struct:
		// ABI tuples decode into structs whose json tags carry the ABI names.
		out := map[string]any{}
		t := rv.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
				name = tag
			}
			p, err := plain(rv.Field(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[name] = p
		}
		return out, nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	}
	return nil, fmt.Errorf("cannot encode %s as JSON", rv.Type())
}
