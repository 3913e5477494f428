package workflow

import "bytes"

// IndentJSON indents compact, valid JSON by two spaces per level, as
// json.Indent(dst, src, "", "  ") does, down to maxDepth levels; deeper
// values stay compact. Indenting every level writes depth × 2 spaces per
// value, so a payload nested 8,000 deep (stored before rflow bounded input
// depth) would print as 128 MB: bounded, the output stays proportional to
// the input.
func IndentJSON(src []byte, maxDepth int) []byte {
	out := bytes.NewBuffer(make([]byte, 0, len(src)*2))
	newline := func(depth int) {
		out.WriteByte('\n')
		for range depth {
			out.WriteString("  ")
		}
	}
	depth, inString := 0, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			out.WriteByte(c)
			if c == '\\' && i+1 < len(src) {
				i++
				out.WriteByte(src[i])
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			out.WriteByte(c)
		case '{', '[':
			out.WriteByte(c)
			depth++
			if depth <= maxDepth && i+1 < len(src) && src[i+1] != '}' && src[i+1] != ']' {
				newline(depth)
			}
		case '}', ']':
			if depth <= maxDepth && i > 0 && src[i-1] != '{' && src[i-1] != '[' {
				newline(depth - 1)
			}
			depth--
			out.WriteByte(c)
		case ',':
			out.WriteByte(c)
			if depth <= maxDepth {
				newline(depth)
			}
		case ':':
			out.WriteByte(c)
			if depth <= maxDepth {
				out.WriteByte(' ')
			}
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}
