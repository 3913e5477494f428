package ozimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxFileSize bounds every configuration file the importer reads.
const maxFileSize = 16 << 20

// Config is an OpenZeppelin Monitor configuration directory as read from
// disk: networks/*.json, monitors/*.json, triggers/*.json and the scripts
// under filters/.
type Config struct {
	Dir      string
	Networks []*Network
	Monitors []*Monitor
	Triggers map[string]*Trigger // by configuration key
	Filters  []string            // script files under filters/, relative to Dir
}

// InputError is an unreadable or invalid input file: File names it
// (relative to the configuration directory), Field the JSON path of the
// offending value when there is one, Line and Col its position when known.
type InputError struct {
	File      string
	Field     string
	Line, Col int
	Msg       string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ReadConfig reads the Monitor configuration under dir. Every file of
// networks/, monitors/ and triggers/ must be valid; the first one that is
// not is an *InputError naming it.
func ReadConfig(dir string) (*Config, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("read Monitor configuration: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: give the directory that holds networks/, monitors/ and triggers/", dir)
	}
	c := &Config{Dir: dir, Triggers: map[string]*Trigger{}}
	found := false
	for _, sub := range []string{"networks", "monitors", "triggers"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("%s has none of networks/, monitors/ or triggers/: is it a Monitor configuration directory?", dir)
	}
	if err := eachJSON(dir, "networks", func(rel string, data []byte) error {
		n, err := parseNetwork(rel, data)
		if err == nil {
			c.Networks = append(c.Networks, n)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := eachJSON(dir, "monitors", func(rel string, data []byte) error {
		m, err := parseMonitor(rel, data)
		if err == nil {
			c.Monitors = append(c.Monitors, m)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := eachJSON(dir, "triggers", func(rel string, data []byte) error {
		ts, err := parseTriggers(rel, data)
		for _, t := range ts {
			if prev, dup := c.Triggers[t.ID]; dup {
				return &InputError{File: rel, Field: t.ID, Msg: fmt.Sprintf("trigger %s is also defined in %s; trigger keys must be unique", t.ID, prev.File)}
			}
			c.Triggers[t.ID] = t
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.checkUnique(); err != nil {
		return nil, err
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "filters"))
	for _, e := range entries {
		if !e.IsDir() {
			c.Filters = append(c.Filters, filepath.ToSlash(filepath.Join("filters", e.Name())))
		}
	}
	return c, nil
}

func (c *Config) checkUnique() error {
	slugs := map[string]string{}
	for _, n := range c.Networks {
		if prev, dup := slugs[n.Slug]; dup {
			return &InputError{File: n.File, Field: "slug", Msg: fmt.Sprintf("network slug %q is also used by %s; slugs must be unique", n.Slug, prev)}
		}
		slugs[n.Slug] = n.File
	}
	names := map[string]string{}
	for _, m := range c.Monitors {
		if prev, dup := names[m.Name]; dup {
			return &InputError{File: m.File, Field: "name", Msg: fmt.Sprintf("monitor name %q is also used by %s; names must be unique", m.Name, prev)}
		}
		names[m.Name] = m.File
	}
	return nil
}

// network returns the network with slug, or nil.
func (c *Config) network(slug string) *Network {
	for _, n := range c.Networks {
		if n.Slug == slug {
			return n
		}
	}
	return nil
}

// eachJSON calls fn for every *.json file of dir/sub in name order. A
// missing sub-directory has no files.
func eachJSON(dir, sub string, fn func(rel string, data []byte) error) error {
	entries, err := os.ReadDir(filepath.Join(dir, sub))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &InputError{File: sub, Msg: err.Error()}
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		rel := sub + "/" + name
		data, err := readBounded(filepath.Join(dir, sub, name))
		if err != nil {
			return &InputError{File: rel, Msg: err.Error()}
		}
		if err := fn(rel, data); err != nil {
			return err
		}
	}
	return nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("larger than %d MiB", maxFileSize>>20)
	}
	return data, nil
}

// decodeStrict decodes data into v, refusing unknown fields (as Monitor
// does: its configuration types deny unknown fields) and trailing data.
// Errors carry the file, the field and the position.
func decodeStrict(rel, prefix string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError(rel, prefix, data, err)
	}
	if dec.More() {
		line, col := lineCol(data, int(dec.InputOffset()))
		return &InputError{File: rel, Line: line, Col: col, Msg: "unexpected data after the JSON value"}
	}
	return nil
}

func jsonError(rel, prefix string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(data, int(syn.Offset))
		return &InputError{File: rel, Line: line, Col: col, Msg: "invalid JSON: " + syn.Error()}
	case errors.As(err, &typ):
		line, col := lineCol(data, valueStart(data, int(typ.Offset)))
		return &InputError{File: rel, Field: joinField(prefix, typ.Field), Line: line, Col: col,
			Msg: fmt.Sprintf("want %s, got a JSON %s", describeGoType(typ.Type.String()), typ.Value)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &InputError{File: rel, Msg: "empty or truncated JSON"}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &InputError{File: rel, Field: joinField(prefix, strings.Trim(f, `"`)),
			Msg: "unknown field (not part of Monitor's configuration format; check its spelling)"}
	}
	return &InputError{File: rel, Field: prefix, Msg: msg}
}

func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "ozimport."), strings.HasPrefix(t, "struct"):
		return "an object"
	case strings.Contains(t, "int"), t == "json.Number":
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	}
	return t
}

// valueStart walks back from the offset encoding/json reports (just after
// the offending value) to the start of a scalar value.
func valueStart(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	if off > 0 && (data[off-1] == '}' || data[off-1] == ']') {
		return off
	}
	for off > 0 && !strings.ContainsRune(":,[{ \t\r\n", rune(data[off-1])) {
		off--
	}
	return off
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, off int) (int, int) {
	off = min(max(off, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}
