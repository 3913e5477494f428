package workflow

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// Bounds of untrusted input (webhook and command bodies, endpoint answers,
// workflow definitions). They are checked while the input is read, before
// anything is built from it, so memory stays proportional to the input.
const (
	// MaxInputDepth is the deepest nesting of arrays and objects (JSON) or
	// of collections (YAML) accepted.
	MaxInputDepth = maxDepth
	// MaxNumberLen is the longest number literal accepted, in characters: far
	// beyond a uint256 (78 digits), far below what makes Postgres's numeric
	// type or big-integer parsing costly.
	MaxNumberLen = 1000
)

// InputError is untrusted input rflow refuses: what is wrong and where.
type InputError struct {
	// Offset is the byte offset of the problem in the input.
	Offset int
	Reason string
}

func (e *InputError) Error() string { return fmt.Sprintf("%s (at byte %d)", e.Reason, e.Offset) }

// CheckJSON scans b once, building nothing, for what rflow refuses to store
// or to decode: bytes that are not UTF-8, a NUL (\u0000) or an unpaired
// UTF-16 surrogate escape in a string (Postgres's jsonb and text refuse
// both), a number longer than MaxNumberLen characters, and nesting deeper
// than MaxInputDepth. It returns the first problem as an *InputError, or
// nil; JSON syntax is left to the decoder.
func CheckJSON(b []byte) error {
	if !utf8.Valid(b) {
		return &InputError{Offset: invalidUTF8At(b), Reason: "the input is not valid UTF-8"}
	}
	depth, number := 0, 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if isNumberByte(c) {
			if number++; number > MaxNumberLen {
				return &InputError{Offset: i, Reason: fmt.Sprintf("a number is longer than %d characters", MaxNumberLen)}
			}
			continue
		}
		number = 0
		switch c {
		case '[', '{':
			if depth++; depth > MaxInputDepth {
				return &InputError{Offset: i, Reason: fmt.Sprintf("nesting is deeper than %d levels", MaxInputDepth)}
			}
		case ']', '}':
			depth--
		case '"':
			end, err := scanString(b, i+1)
			if err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// scanString checks a string whose body starts at b[i] and returns the
// offset of its closing quote (or len(b) when it has none: the decoder
// reports that).
func scanString(b []byte, i int) (int, error) {
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i, nil
		case 0:
			return 0, &InputError{Offset: i, Reason: "a string holds a NUL byte"}
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				if err := checkUnicodeEscape(b, i); err != nil {
					return 0, err
				}
			}
			i++ // the escaped character
		}
	}
	return len(b), nil
}

// checkUnicodeEscape checks the \uXXXX escape at b[i]: not NUL, and a
// surrogate only as a high one followed by a low one.
func checkUnicodeEscape(b []byte, i int) error {
	r, ok := hex4(b, i+2)
	if !ok {
		return nil // malformed: the decoder says so
	}
	switch {
	case r == 0:
		return &InputError{Offset: i, Reason: `a string holds \u0000 (NUL), which Postgres cannot store`}
	case r >= 0xDC00 && r <= 0xDFFF:
		return &InputError{Offset: i, Reason: "a string holds an unpaired UTF-16 surrogate escape"}
	case r >= 0xD800 && r <= 0xDBFF:
		lo, ok := rune(0), i+6 < len(b) && b[i+6] == '\\' && i+7 < len(b) && b[i+7] == 'u'
		if ok {
			lo, ok = hex4(b, i+8)
		}
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return &InputError{Offset: i, Reason: "a string holds an unpaired UTF-16 surrogate escape"}
		}
	}
	return nil
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// invalidUTF8At returns the offset of the first byte that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// CheckText reports, as an *InputError, the first thing in s that
// Postgres's text cannot hold: bytes that are not UTF-8, or a NUL.
func CheckText(s []byte) error {
	if !utf8.Valid(s) {
		return &InputError{Offset: invalidUTF8At(s), Reason: "the input is not valid UTF-8"}
	}
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return &InputError{Offset: i, Reason: "it holds a NUL byte"}
	}
	return nil
}

// DecodeInput decodes untrusted JSON (a webhook body, an endpoint's
// answer) as UnmarshalJSON does, after CheckJSON has passed it: what it
// returns can always be journaled.
func DecodeInput(b []byte) (any, error) {
	if err := CheckJSON(b); err != nil {
		return nil, err
	}
	return UnmarshalJSON(b)
}
