package ozimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The importer writes YAML by hand rather than through a marshaller so that
// every part can carry a comment saying where it came from. Values are a
// small ordered tree: ymap (a mapping in key order), ylist, and scalars.

type ymap []ykv

type ykv struct {
	key     string
	val     any    // string, an integer, bool, ymap or ylist
	comment string // written above the key; lines split on \n
}

type ylist []yitem

type yitem struct {
	val     any
	comment string
}

func (m ymap) add(key string, val any, comment string) ymap {
	return append(m, ykv{key: key, val: val, comment: comment})
}

// renderYAML writes m as a YAML document after header (comment lines).
func renderYAML(header string, m ymap) []byte {
	var b bytes.Buffer
	writeComment(&b, 0, header)
	writeMap(&b, 0, m)
	return b.Bytes()
}

func writeComment(b *bytes.Buffer, indent int, c string) {
	if c == "" {
		return
	}
	for _, line := range strings.Split(c, "\n") {
		b.WriteString(strings.Repeat(" ", indent))
		if line == "" {
			b.WriteString("#\n")
			continue
		}
		b.WriteString("# ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

func writeMap(b *bytes.Buffer, indent int, m ymap) {
	for i, kv := range m {
		if kv.comment != "" && i > 0 && indent == 0 {
			b.WriteByte('\n')
		}
		writeComment(b, indent, kv.comment)
		b.WriteString(strings.Repeat(" ", indent))
		b.WriteString(kv.key)
		b.WriteByte(':')
		writeValue(b, indent, kv.val)
	}
}

// writeValue writes v after "key:" or "- " (the caller wrote the prefix).
func writeValue(b *bytes.Buffer, indent int, v any) {
	switch x := v.(type) {
	case ymap:
		if len(x) == 0 {
			b.WriteString(" {}\n")
			return
		}
		b.WriteByte('\n')
		writeMap(b, indent+2, x)
	case ylist:
		if len(x) == 0 {
			b.WriteString(" []\n")
			return
		}
		b.WriteByte('\n')
		writeList(b, indent+2, x)
	default:
		b.WriteByte(' ')
		b.WriteString(scalar(v))
		b.WriteByte('\n')
	}
}

func writeList(b *bytes.Buffer, indent int, l ylist) {
	for _, it := range l {
		writeComment(b, indent, it.comment)
		if x, ok := it.val.(ymap); ok && len(x) > 0 && x[0].comment != "" {
			// The first key's comment goes above the dash.
			writeComment(b, indent, x[0].comment)
			x = append(ymap{{key: x[0].key, val: x[0].val}}, x[1:]...)
			it.val = x
		}
		b.WriteString(strings.Repeat(" ", indent))
		b.WriteString("-")
		switch x := it.val.(type) {
		case ymap:
			if len(x) == 0 {
				b.WriteString(" {}\n")
				continue
			}
			// The first key sits on the dash line; the rest align under it.
			var inner bytes.Buffer
			writeMap(&inner, indent+2, x)
			b.WriteByte(' ')
			b.Write(bytes.TrimLeft(inner.Bytes(), " "))
		default:
			writeValue(b, indent, it.val)
		}
	}
}

// scalar renders a scalar; strings are always double-quoted (JSON string
// syntax is valid YAML), so no value is ever read back as another type.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(x) // a string always encodes
		return strings.TrimSuffix(b.String(), "\n")
	case bool:
		if x {
			return "true"
		}
		return "false"
	case int, int64, uint64, uint32:
		return fmt.Sprint(x)
	case nil:
		return "null"
	}
	panic(fmt.Sprintf("ozimport: no YAML scalar for %T", v))
}
