package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/urfave/cli/v2"
)

func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}
}

// checkOutput fails on an unknown -o, so a command can say so before it
// does any work.
func checkOutput(c *cli.Context) error {
	switch c.String("output") {
	case "json", "table", "":
		return nil
	}
	return usagef("-o: unknown format %q (want table or json)", c.String("output"))
}

// printJSON writes v as indented JSON when -o json was asked for and
// reports whether it did.
func printJSON(c *cli.Context, v any) (bool, error) {
	switch c.String("output") {
	case "json":
		return true, writeJSON(c.App.Writer, v)
	default:
		return false, checkOutput(c)
	}
}

// maxIndentDepth is the deepest level writeJSON indents; deeper values are
// written compact. Indenting every level writes a line per value with
// depth × 2 spaces: a payload nested 20,000 deep (stored before rflow
// bounded input depth) would print hundreds of MB.
const maxIndentDepth = 32

// writeJSON writes v as JSON indented by two spaces, as
// json.Encoder.SetIndent("", "  ") does, down to maxIndentDepth: the
// output stays proportional to the value's size.
func writeJSON(w io.Writer, v any) error {
	var compact bytes.Buffer
	if err := json.NewEncoder(&compact).Encode(v); err != nil {
		return err
	}
	src := bytes.TrimRight(compact.Bytes(), "\n")
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
			if depth <= maxIndentDepth && i+1 < len(src) && src[i+1] != '}' && src[i+1] != ']' {
				newline(depth)
			}
		case '}', ']':
			if depth <= maxIndentDepth && src[i-1] != '{' && src[i-1] != '[' {
				newline(depth - 1)
			}
			depth--
			out.WriteByte(c)
		case ',':
			out.WriteByte(c)
			if depth <= maxIndentDepth {
				newline(depth)
			}
		case ':':
			out.WriteByte(c)
			if depth <= maxIndentDepth {
				out.WriteByte(' ')
			}
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}
