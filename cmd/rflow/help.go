package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// unknownCommand is the usage error for a command name that is not one of
// cmds, with the closest name when there is one close enough to be a typo.
func unknownCommand(cmds []*cli.Command, prefix, name string) error {
	if s := closest(cmds, name); s != "" {
		return usagef("%sunknown command %q: did you mean %q?", prefix, name, s)
	}
	return usagef("%sunknown command %q", prefix, name)
}

// closest returns the visible command name nearest to name: within two
// edits (a third of the name for short ones), or one it starts.
func closest(cmds []*cli.Command, name string) string {
	best, bestDist := "", 0
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			d := editDistance(name, n)
			if strings.HasPrefix(n, name) && len(name) >= 2 {
				d = 1
			}
			if d <= max(1, min(2, len(n)/3)) && (best == "" || d < bestDist) {
				best, bestDist = c.Name, d
			}
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment): a swap of neighbours, like strat for start, is one edit.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// plainHelp undoes what go-ethereum's internal/flags package (linked in
// through the dev chain) does to urfave/cli's globals in its init: a
// geth-style flag layout and a "MISC" category for --help, which made our
// help print blank lines and a stray category.
func plainHelp() {
	cli.FlagStringer = flagString
	cli.HelpFlag = &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
}

// flagString is one line of help per flag: names, usage, the default and
// the environment variable.
func flagString(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	names := make([]string, 0, len(f.Names()))
	for _, n := range f.Names() {
		dash := "--"
		if len(n) == 1 {
			dash = "-"
		}
		names = append(names, dash+n)
	}
	s := strings.Join(names, ", ")
	if df.TakesValue() {
		s += " value"
	}
	s += "\t" + df.GetUsage()
	if _, isBool := f.(*cli.BoolFlag); !isBool {
		if d := df.GetDefaultText(); d != "" && d != `""` {
			s += fmt.Sprintf(" (default: %s)", d)
		}
	}
	if env := df.GetEnvVars(); len(env) > 0 {
		s += " [$" + strings.Join(env, ", $") + "]"
	}
	return s
}
