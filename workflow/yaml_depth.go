package workflow

import (
	"bytes"
	"fmt"
)

// checkYAMLDepth scans a YAML (or JSON) document for nesting deeper than
// MaxInputDepth before the YAML library sees it: goccy/go-yaml has no depth
// bound, and its lexer and parser use memory quadratic in the nesting (a
// 40 KB document of brackets took 640 MB, 200 KB took 15 GB). The scan
// builds nothing and keeps one small stack per line, so it is linear in
// the input. It returns the position of the first level too deep, or nil.
//
// It follows the structure YAML nests by: flow collections ([ and { outside
// quoted scalars and comments) and block collections (a "- " entry, a "? "
// or ": " indicator, or a "key:" at a column deeper than the enclosing
// one). Quoted scalars (which may span lines), comments, plain scalars in
// block context (which may hold brackets) and block scalars (| and >) do
// not nest. It errs towards counting a level too many, never a level too
// few: the converter's exact check (maxDepth) still runs after parsing.
func checkYAMLDepth(file string, src []byte) *Diagnostic {
	s := &depthScan{file: file}
	for line, rest := 1, src; len(rest) > 0 || line == 1; line++ {
		var text []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			text, rest = rest[:i], rest[i+1:]
		} else {
			text, rest = rest, nil
		}
		if d := s.line(line, bytes.TrimSuffix(text, []byte("\r"))); d != nil {
			return d
		}
		if rest == nil {
			break
		}
	}
	return nil
}

type depthScan struct {
	file string
	// blocks holds the columns of the open block collections.
	blocks []int
	flow   int  // open flow collections
	quote  byte // the open quoted scalar's quote, or 0
	// scalarIndent is the indentation a block scalar's content is deeper
	// than, or -1 outside one.
	scalarIndent int
	inScalar     bool
	err          *Diagnostic
}

func (s *depthScan) tooDeep(line, col int) *Diagnostic {
	return &Diagnostic{Pos: Position{File: s.file, Line: line, Col: col + 1},
		Message: fmt.Sprintf("document nested too deeply (more than %d levels)", MaxInputDepth)}
}

func (s *depthScan) depth() int { return len(s.blocks) + s.flow }

func (s *depthScan) line(line int, text []byte) *Diagnostic {
	indent := 0
	for indent < len(text) && text[indent] == ' ' {
		indent++
	}
	blank := indent == len(text) || text[indent] == '#'
	if s.inScalar {
		if blank || indent > s.scalarIndent {
			return nil
		}
		s.inScalar = false
	}
	pos := 0
	if s.quote == 0 && s.flow == 0 {
		if blank {
			return nil
		}
		for len(s.blocks) > 0 && s.blocks[len(s.blocks)-1] > indent {
			s.blocks = s.blocks[:len(s.blocks)-1]
		}
	} else if pos = s.flowText(line, text, 0); pos < 0 {
		return s.err
	}
	// Alternate between block text and flow (or quoted) text until the
	// line ends.
	for pos >= 0 && pos < len(text) {
		if pos = s.blockLine(line, text, pos); pos < 0 {
			break
		}
		pos = s.flowText(line, text, pos)
	}
	return s.err
}

// open records a block collection starting at col; false means it is too
// deep (s.err).
func (s *depthScan) open(line, col int) bool {
	if n := len(s.blocks); n > 0 && s.blocks[n-1] >= col {
		return true
	}
	s.blocks = append(s.blocks, col)
	if s.depth() > MaxInputDepth {
		s.err = s.tooDeep(line, col)
		return false
	}
	return true
}

// blockLine reads the block structure of text from pos, outside any flow
// collection or quoted scalar, and returns where flow (or quoted) text
// begins, or -1 when the rest of the line cannot nest or a level was too
// deep (s.err).
func (s *depthScan) blockLine(line int, text []byte, pos int) int {
	for {
		pos = skipSpaces(text, pos)
		if pos >= len(text) || text[pos] == '#' {
			return -1
		}
		c := text[pos]
		if (c == '-' || c == '?' || c == ':') && (pos+1 == len(text) || text[pos+1] == ' ') {
			if !s.open(line, pos) {
				return -1
			}
			pos++
			continue
		}
		start := pos
		for pos < len(text) && (text[pos] == '&' || text[pos] == '!') { // anchors and tags
			for pos < len(text) && text[pos] != ' ' {
				pos++
			}
			pos = skipSpaces(text, pos)
		}
		if pos >= len(text) {
			return -1
		}
		switch text[pos] {
		case '[', '{', '"', '\'':
			return pos
		case '|', '>':
			// A block scalar: its content is the lines indented deeper
			// than the collection it is a value of.
			s.inScalar, s.scalarIndent = true, -1
			if n := len(s.blocks); n > 0 {
				s.scalarIndent = s.blocks[n-1]
			}
			return -1
		}
		// A plain scalar: a key when ": " (or a final ':') follows in it,
		// and then its value comes next.
		colon := plainKeyEnd(text, pos)
		if colon < 0 || !s.open(line, start) {
			return -1
		}
		pos = colon + 1
	}
}

// plainKeyEnd returns the offset of the ':' that ends a plain key starting
// at pos, or -1 when the plain scalar is not a key.
func plainKeyEnd(text []byte, pos int) int {
	for i := pos; i < len(text); i++ {
		switch {
		case text[i] == ':' && (i+1 == len(text) || text[i+1] == ' '):
			return i
		case text[i] == '#' && i > pos && text[i-1] == ' ':
			return -1
		}
	}
	return -1
}

// flowText scans text from pos through flow collections and quoted
// scalars, which may continue on later lines. It returns where block text
// resumes (after the collection or block-context quoted scalar that ends
// there), or -1 when the line ends first, a comment starts or a level was
// too deep (s.err).
func (s *depthScan) flowText(line int, text []byte, pos int) int {
	for i := pos; i < len(text); i++ {
		c := text[i]
		if s.quote != 0 {
			switch {
			case s.quote == '"' && c == '\\':
				i++
			case c == s.quote && s.quote == '\'' && i+1 < len(text) && text[i+1] == '\'':
				i++
			case c == s.quote:
				s.quote = 0
				if s.flow == 0 {
					return i + 1 // a quoted key or value in block context
				}
			}
			continue
		}
		switch c {
		case '"', '\'':
			s.quote = c
		case '#':
			if i == 0 || text[i-1] == ' ' || text[i-1] == '\t' {
				return -1
			}
		case '[', '{':
			if s.flow++; s.depth() > MaxInputDepth {
				s.err = s.tooDeep(line, i)
				return -1
			}
		case ']', '}':
			if s.flow > 0 {
				s.flow--
			}
			if s.flow == 0 {
				return i + 1
			}
		}
	}
	return -1
}

func skipSpaces(text []byte, pos int) int {
	for pos < len(text) && (text[pos] == ' ' || text[pos] == '\t') {
		pos++
	}
	return pos
}
