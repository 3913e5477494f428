package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"

	"github.com/goccy/go-yaml"

	"github.com/rflow-dev/rflow/redact"
)

// A deployed generation is stored as its canonical JSON (workflow.Spec:
// keys sorted, ${VAR} references unresolved). The workflow page shows it
// as YAML, the way it was written, with the keys a reader looks for first
// (name, id, trigger, steps) in front.

// leadingKeys come first in a mapping, in this order; the rest follow in
// the spec's (sorted) order.
var leadingKeys = []string{"name", "id", "trigger", "steps"}

// secretKeys are fields whose literal value is a credential: shown masked
// unless they are a bare ${VAR} reference, which names it without
// revealing it (a ${VAR:-default} may hold one in its default).
var envRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

var secretKeys = map[string]bool{"secret": true, "private_key": true, "password": true, "token": true}

// yamlNumber is a JSON number written as is (no float rounding of a
// uint256).
type yamlNumber string

func (n yamlNumber) MarshalYAML() ([]byte, error) { return []byte(n), nil }

// specYAML renders a canonical JSON spec as YAML.
func specYAML(spec []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	v, err := yamlValue(dec, "")
	if err != nil {
		return "", fmt.Errorf("read spec: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("read spec: data after the definition")
	}
	out, err := yaml.MarshalWithOptions(v, yaml.IndentSequence(true))
	if err != nil {
		return "", fmt.Errorf("render spec: %w", err)
	}
	return redact.Text(string(out)), nil
}

// yamlValue reads the next JSON value as ordered YAML data; key is the
// field it is the value of.
func yamlValue(dec *json.Decoder, key string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			list := []any{}
			for dec.More() {
				v, err := yamlValue(dec, "")
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		var m yaml.MapSlice
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := yamlValue(dec, k)
			if err != nil {
				return nil, err
			}
			m = append(m, yaml.MapItem{Key: k, Value: v})
		}
		slices.SortStableFunc(m, func(a, b yaml.MapItem) int { return rank(a.Key.(string)) - rank(b.Key.(string)) })
		if m == nil {
			m = yaml.MapSlice{}
		}
		_, err := dec.Token()
		return m, err
	case json.Number:
		return yamlNumber(t.String()), nil
	case string:
		if secretKeys[key] && !envRef.MatchString(t) {
			return "(hidden)", nil
		}
		return t, nil
	}
	return tok, nil
}

func rank(key string) int {
	if i := slices.Index(leadingKeys, key); i >= 0 {
		return i
	}
	return len(leadingKeys)
}
