package main

import (
	"encoding/json"

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
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	default:
		return false, checkOutput(c)
	}
}
