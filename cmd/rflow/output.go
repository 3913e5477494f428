package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/workflow"
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
// written compact (workflow.IndentJSON).
const maxIndentDepth = 32

// writeJSON writes v as JSON indented by two spaces, as
// json.Encoder.SetIndent("", "  ") does, down to maxIndentDepth: the
// output stays proportional to the value's size.
func writeJSON(w io.Writer, v any) error {
	var compact bytes.Buffer
	if err := json.NewEncoder(&compact).Encode(v); err != nil {
		return err
	}
	out := workflow.IndentJSON(bytes.TrimRight(compact.Bytes(), "\n"), maxIndentDepth)
	_, err := w.Write(append(out, '\n'))
	return err
}
