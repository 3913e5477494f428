package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// Event is one event of a contract ABI, ready to build log filters and
// decode logs.
type Event struct {
	ev abi.Event
}

// ParseEvent reads a plain ABI JSON array, or a Foundry/Hardhat artifact
// with an "abi" field, and returns its event name.
func ParseEvent(abiJSON []byte, name string) (*Event, error) {
	a, err := ParseABI(abiJSON)
	if err != nil {
		return nil, err
	}
	return NewEvent(a, name)
}

// ParseABI reads a plain ABI JSON array or an artifact with an "abi" field.
func ParseABI(abiJSON []byte) (abi.ABI, error) {
	trimmed := bytes.TrimSpace(abiJSON)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var artifact struct {
			ABI json.RawMessage `json:"abi"`
		}
		if err := json.Unmarshal(trimmed, &artifact); err != nil {
			return abi.ABI{}, fmt.Errorf("parse ABI artifact: %w", err)
		}
		trimmed = artifact.ABI
	}
	a, err := abi.JSON(bytes.NewReader(trimmed))
	if err != nil {
		return abi.ABI{}, fmt.Errorf("parse ABI: %w", err)
	}
	return a, nil
}

// NewEvent returns event name of a.
func NewEvent(a abi.ABI, name string) (*Event, error) {
	ev, ok := a.Events[name]
	if !ok {
		return nil, fmt.Errorf("event %s not in ABI", name)
	}
	if ev.Anonymous {
		return nil, fmt.Errorf("event %s is anonymous: it has no topic to filter by", name)
	}
	return &Event{ev: ev}, nil
}

// Name is the event's name.
func (e *Event) Name() string { return e.ev.Name }

// Topic is the event's signature hash (topic 0).
func (e *Event) Topic() common.Hash { return e.ev.ID }

// Decoded is a decoded log. Args holds the event's arguments by name
// (unnamed ones as arg0, arg1, …): every integer type as an exact *big.Int,
// addresses, hashes and bytes as 0x hex strings, bools and strings as is,
// arrays as []any and tuples as map[string]any. Indexed dynamic arguments
// (string, bytes, arrays) are only present as their topic hash.
type Decoded struct {
	Event     string
	Args      map[string]any
	Address   common.Address
	Block     uint64
	BlockHash common.Hash
	TxHash    common.Hash
	// LogIndex is the log's position in its block; TxLogIndex its
	// position in its transaction (0 for the transaction's first log),
	// which a reorg that re-mines the transaction elsewhere does not
	// change: the occurrence's identity (EventKey).
	LogIndex   uint
	TxLogIndex uint
}

// Fields returns the arguments plus block, block_hash, tx_hash, log_index,
// tx_log_index and address: the `event` variable of workflow expressions.
func (d Decoded) Fields() map[string]any {
	m := make(map[string]any, len(d.Args)+6)
	for k, v := range d.Args {
		m[k] = v
	}
	m["block"] = d.Block
	m["block_hash"] = d.BlockHash.Hex()
	m["tx_hash"] = d.TxHash.Hex()
	m["log_index"] = uint64(d.LogIndex)
	m["tx_log_index"] = uint64(d.TxLogIndex)
	m["address"] = d.Address.Hex()
	return m
}

// MarshalJSON encodes Fields; big integers become exact JSON numbers.
func (d Decoded) MarshalJSON() ([]byte, error) {
	return d.AppendJSON(nil)
}

// AppendJSON appends the JSON encoding of Fields to b, keys sorted. It is
// the hot path of ingestion, so common values are encoded without
// reflection.
func (d Decoded) AppendJSON(b []byte) ([]byte, error) {
	keys := make([]string, 0, len(d.Args)+6)
	for k := range d.Args {
		switch k {
		case "block", "block_hash", "tx_hash", "log_index", "tx_log_index", "address":
			continue // metadata wins, as in Fields
		}
		keys = append(keys, k)
	}
	keys = append(keys, "block", "block_hash", "tx_hash", "log_index", "tx_log_index", "address")
	sort.Strings(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		var err error
		switch k {
		case "block":
			b = strconv.AppendUint(b, d.Block, 10)
		case "block_hash":
			b = appendJSONString(b, d.BlockHash.Hex())
		case "tx_hash":
			b = appendJSONString(b, d.TxHash.Hex())
		case "log_index":
			b = strconv.AppendUint(b, uint64(d.LogIndex), 10)
		case "tx_log_index":
			b = strconv.AppendUint(b, uint64(d.TxLogIndex), 10)
		case "address":
			b = appendJSONString(b, d.Address.Hex())
		default:
			b, err = appendJSONValue(b, d.Args[k])
		}
		if err != nil {
			return nil, fmt.Errorf("encode %s.%s: %w", d.Event, k, err)
		}
	}
	return append(b, '}'), nil
}

func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case *big.Int:
		if x == nil {
			return append(b, "null"...), nil
		}
		return x.Append(b, 10), nil
	case string:
		return appendJSONString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}

// appendJSONString quotes plain ASCII directly and leaves anything needing
// escapes to encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Decode decodes l, which must be one of this event's logs.
func (e *Event) Decode(l types.Log) (Decoded, error) {
	d := Decoded{Event: e.ev.Name, Address: l.Address, Block: l.BlockNumber, BlockHash: l.BlockHash,
		TxHash: l.TxHash, LogIndex: l.Index, Args: make(map[string]any, len(e.ev.Inputs))}
	if len(l.Topics) == 0 || l.Topics[0] != e.ev.ID {
		return d, fmt.Errorf("log %s:%d is not a %s event", l.TxHash.Hex(), l.Index, e.ev.Name)
	}
	raw := make(map[string]any, len(e.ev.Inputs))
	var indexed abi.Arguments
	for _, in := range e.ev.Inputs {
		if in.Indexed {
			indexed = append(indexed, in)
		}
	}
	if len(l.Topics)-1 != len(indexed) {
		return d, fmt.Errorf("log %s:%d: %d indexed topics, %s declares %d", l.TxHash.Hex(), l.Index,
			len(l.Topics)-1, e.ev.Name, len(indexed))
	}
	if err := abi.ParseTopicsIntoMap(raw, indexed, l.Topics[1:]); err != nil {
		return d, fmt.Errorf("decode %s topics of %s:%d: %w", e.ev.Name, l.TxHash.Hex(), l.Index, err)
	}
	if len(e.ev.Inputs.NonIndexed()) > 0 {
		if err := e.ev.Inputs.UnpackIntoMap(raw, l.Data); err != nil {
			return d, fmt.Errorf("decode %s data of %s:%d: %w", e.ev.Name, l.TxHash.Hex(), l.Index, err)
		}
	}
	for i, in := range e.ev.Inputs {
		name := in.Name
		if name == "" {
			name = fmt.Sprintf("arg%d", i)
		}
		d.Args[name] = Normalize(raw[in.Name])
	}
	return d, nil
}

// Normalize converts a value decoded by go-ethereum's abi package into
// rflow's expression-friendly shape (see Decoded): integers become *big.Int,
// byte strings and addresses 0x hex, arrays []any, tuples map[string]any.
func Normalize(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case *big.Int:
		return x
	case uint8:
		return new(big.Int).SetUint64(uint64(x))
	case uint16:
		return new(big.Int).SetUint64(uint64(x))
	case uint32:
		return new(big.Int).SetUint64(uint64(x))
	case uint64:
		return new(big.Int).SetUint64(x)
	case int8:
		return big.NewInt(int64(x))
	case int16:
		return big.NewInt(int64(x))
	case int32:
		return big.NewInt(int64(x))
	case int64:
		return big.NewInt(x)
	case common.Address:
		return x.Hex()
	case common.Hash:
		return x.Hex()
	case []byte:
		return hexutil.Encode(x)
	case bool, string:
		return x
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return hexutil.Encode(b)
		}
		return normalizeList(rv)
	case reflect.Slice:
		return normalizeList(rv)
	case reflect.Struct:
		m := make(map[string]any, rv.NumField())
		for i := 0; i < rv.NumField(); i++ {
			f := rv.Type().Field(i)
			name := f.Name
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" {
				name = tag
			}
			m[name] = Normalize(rv.Field(i).Interface())
		}
		return m
	case reflect.Pointer:
		if rv.IsNil() {
			return nil
		}
		return Normalize(rv.Elem().Interface())
	}
	return v
}

func normalizeList(rv reflect.Value) []any {
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = Normalize(rv.Index(i).Interface())
	}
	return out
}
