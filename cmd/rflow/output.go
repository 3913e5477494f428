package main

import (
	"encoding/json"

	"github.com/urfave/cli/v2"
)

func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}
}

// printJSON writes v as indented JSON when -o json was asked for and
// reports whether it did.
func printJSON(c *cli.Context, v any) (bool, error) {
	switch c.String("output") {
	case "json":
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "table", "":
		return false, nil
	default:
		return false, usagef("-o: unknown format %q (want table or json)", c.String("output"))
	}
}
