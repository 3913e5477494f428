// Command rflow is the rflow CLI: an exactly-once workflow engine for
// on-chain automation. Each command parses its flags, calls one package
// function, and prints the result.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes: 0 ok, 1 failure (including validation errors), 2 usage.
const (
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	plainHelp()
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the process exit code. It never lets a
// panic or a stack trace reach the user.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "rflow: internal error: %v (please report this)\n", r)
			code = exitFailure
		}
	}()
	ctx, stop := shutdownContext(stderr, os.Exit)
	defer stop()

	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, interspersed(app, args))
	if err == nil {
		return 0
	}
	err = noSchema(err)
	var exitErr cli.ExitCoder
	if errors.As(err, &exitErr) {
		if msg := exitErr.Error(); msg != "" {
			fmt.Fprintln(stderr, "rflow:", msg)
		}
		return exitErr.ExitCode()
	}
	var uerr usageError
	if errors.As(err, &uerr) {
		fmt.Fprintf(stderr, "rflow: %v\nRun 'rflow --help' for usage.\n", err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "rflow:", err)
	return exitFailure
}

// usageError marks a mistake in how the command was invoked (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// noArgs refuses positional arguments to a command that takes none (a
// listing would otherwise ignore them: `runs list hello` is not a filter);
// hint says what to use instead.
func noArgs(c *cli.Context, hint string) error {
	if c.NArg() == 0 {
		return nil
	}
	return usagef("%s takes no arguments, got %q (%s)", commandPath(c), c.Args().First(), hint)
}

// commandPath names the command c runs as a user types it after rflow
// ("runs show"), for messages.
func commandPath(c *cli.Context) string {
	return strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
}

// checkWorkers refuses a --workers below 1 (the engine would quietly use
// its default instead).
func checkWorkers(c *cli.Context) error {
	if n := c.Int("workers"); n < 1 {
		return usagef("--workers %d: want at least 1 step job at a time", n)
	}
	return nil
}

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "rflow",
		Usage:                "exactly-once workflows for on-chain automation",
		Version:              buildVersion(),
		Writer:               stdout,
		ErrWriter:            stderr,
		HideVersion:          true, // our own --version, so a command's -v stays its own
		EnableBashCompletion: false,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: versionFlagName, Aliases: []string{"v"}, Usage: "print the rflow version"},
			&cli.StringFlag{
				Name:    "database-url",
				Usage:   "Postgres URL (absent: an embedded local Postgres)",
				EnvVars: []string{"DATABASE_URL"},
			},
		}, logFlags()...),
		Commands: []*cli.Command{
			versionCommand(),
			initCommand(),
			devCommand(),
			migrateCommand(),
			validateCommand(),
			startCommand(),
			runCommand(),
			runsCommand(),
			statusCommand(),
			approvalsCommand(),
			approveCommand(),
			rejectCommand(),
			workflowsCommand(),
			budgetsCommand(),
			replayCommand(),
			testCommand(),
			importCommand(),
		},
		Action: func(c *cli.Context) error {
			if c.Bool(versionFlagName) {
				fmt.Fprintln(c.App.Writer, "rflow", c.App.Version)
				return nil
			}
			if c.NArg() > 0 {
				return unknownCommand(c.App.Commands, "", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Before:         checkLogFlags,
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {}, // run() reports errors
	}
	setUsageHandlers(app.Commands)
	return app
}

// setUsageHandlers makes flag errors in every (sub)command exit with code 2.
func setUsageHandlers(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
		if c.Action == nil && len(c.Subcommands) > 0 {
			sub := c
			c.Action = func(ctx *cli.Context) error {
				if ctx.NArg() > 0 {
					return unknownCommand(sub.Subcommands, sub.FullName()+": ", ctx.Args().First())
				}
				return cli.ShowSubcommandHelp(ctx)
			}
		}
		setUsageHandlers(c.Subcommands)
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the rflow version",
		Action: func(c *cli.Context) error {
			fmt.Fprintln(c.App.Writer, "rflow", c.App.Version)
			return nil
		},
	}
}

const versionFlagName = "version"

// buildVersion is the version set with -ldflags, else what the Go
// toolchain stamped: the module version of a `go install …@v1.2.3`, or the
// commit (and whether the tree was dirty) of a build from a checkout.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	return stampedVersion(bi)
}

// stampedVersion is the version the Go toolchain recorded in bi.
func stampedVersion(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return version
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "dev-" + rev + dirty
}
