package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed reorders args into the shape urfave/cli parses: global
// flags first, then the command path, the command's flags, and its
// positional arguments. urfave/cli stops parsing flags at the first
// positional and knows global flags only before the command, so without
// this `rflow runs show <id> -o json` and `rflow migrate --database-url U`
// (both as the docs write them) fail. A flag the command defines itself
// stays the command's; --version is global only in front of the command.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	var globals, path, own, positional []string
	cmds := app.Commands
	var flags []cli.Flag // the deepest command's flags; nil before any command
	inCommand := false
	// take appends the flag at args[i] (and its value) to dst and returns
	// the index of the last argument it consumed.
	take := func(dst *[]string, set []cli.Flag, i int) int {
		*dst = append(*dst, args[i])
		if takesValue(set, args[i]) && i+1 < len(args) {
			*dst = append(*dst, args[i+1])
			return i + 1
		}
		return i
	}
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			switch {
			case !inCommand:
				i = take(&globals, app.Flags, i)
			case findFlag(flags, a) == nil && movableGlobal(app.Flags, a):
				i = take(&globals, app.Flags, i)
			case len(cmds) == 0:
				i = take(&own, flags, i)
			default:
				i = take(&path, flags, i)
			}
			continue
		}
		if len(cmds) == 0 {
			positional = append(positional, a)
			continue
		}
		cmd := findCommand(cmds, a)
		if cmd == nil {
			// An unknown (sub)command: leave the rest for urfave/cli to
			// report, in order.
			positional = append(positional, args[i:]...)
			i = len(args)
			break
		}
		path = append(path, a)
		cmds, flags, inCommand = cmd.Subcommands, cmd.Flags, true
	}
	if i < len(args) {
		positional = append(positional, args[i:]...)
	}
	out := append([]string{args[0]}, globals...)
	out = append(out, path...)
	out = append(out, own...)
	return append(out, positional...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, alias := range c.Aliases {
			if alias == name {
				return c
			}
		}
	}
	return nil
}

// flagName is arg without its dashes and any =value.
func flagName(arg string) string {
	name := strings.TrimLeft(arg, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	return name
}

// findFlag returns the flag of set that arg (as written, e.g. "-o" or
// "--key=K") names, or nil.
func findFlag(set []cli.Flag, arg string) cli.Flag {
	name := flagName(arg)
	for _, f := range set {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// movableGlobal reports whether arg is a global flag that may be written
// after the command.
func movableGlobal(global []cli.Flag, arg string) bool {
	f := findFlag(global, arg)
	return f != nil && f.Names()[0] != versionFlagName
}

// takesValue reports whether flag arg (as written, e.g. "-o" or "--key")
// consumes the next argument.
func takesValue(set []cli.Flag, arg string) bool {
	if strings.Contains(arg, "=") {
		return false
	}
	f := findFlag(set, arg)
	if f == nil {
		return false
	}
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}
