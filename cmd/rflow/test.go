package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/flowtest"
	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/workflow"
)

func testCommand() *cli.Command {
	return &cli.Command{
		Name:      "test",
		Usage:     "run the workflow tests in dir/tests/*.test.yaml (see docs/testing.md)",
		ArgsUsage: "[dir]",
		Description: "Each test feeds a workflow occurrences, answers its HTTP requests from stubs and checks what\n" +
			"comes out. Tests run on the project's database under test_<uuid>__<workflow>, in an engine of\n" +
			"their own that no live process shares, and delete every row they made. Exit 0 when all pass.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "project file (default: dir/rflow.yaml)"},
			outputFlag(),
			&cli.StringFlag{Name: "run", Usage: "run only the tests whose name matches this regular expression"},
			&cli.IntFlag{Name: "parallel", Value: 4, Usage: "how many tests run at once"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "how long one run may take to finish"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("test takes at most one project directory")
			}
			if err := checkOutput(c); err != nil {
				return err
			}
			dir := c.Args().First()
			if dir == "" {
				dir = "."
			}
			if !c.IsSet("config") {
				if err := c.Set("config", filepath.Join(dir, "rflow.yaml")); err != nil {
					return err
				}
			}
			if n := c.Int("parallel"); n < 1 {
				return usagef("--parallel %d: want at least 1 test at a time", n)
			}
			if d := c.Duration("timeout"); d <= 0 {
				return usagef("--timeout %s: want a positive duration, e.g. 30s", d)
			}
			var sel *regexp.Regexp
			if r := c.String("run"); r != "" {
				var err error
				if sel, err = regexp.Compile(r); err != nil {
					return usagef("-run: %v", err)
				}
			}
			logger := newLogger(c)
			// Tests sign and call nothing real: a wallet's key or an RPC URL
			// may be unset.
			project, err := loadProjectWith(c, workflow.LoadOptions{AllowUnsetEnv: true})
			if err != nil {
				return err
			}
			paths, err := flowtest.Discover(dir)
			if err != nil {
				return err
			}
			var files []*fixture.File
			bad := 0
			for _, p := range paths {
				f, err := fixture.ParseFile(p)
				var ds workflow.Diagnostics
				if errors.As(err, &ds) {
					for _, d := range ds {
						fmt.Fprintln(c.App.ErrWriter, d.String())
					}
					bad += len(ds)
					continue
				}
				if err != nil {
					return err
				}
				files = append(files, f)
			}
			if bad > 0 {
				return cli.Exit(fmt.Sprintf("the test fixtures are not valid (%d problem(s))", bad), exitFailure)
			}
			db, err := openMigrated(c, project.Name, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			ns, err := readNamespace(c.Context, db.Pool, project.Name)
			if err != nil {
				return err
			}
			// What the tests cannot exercise is said, never left silent.
			unexercised := flowtest.Unexercised(project, files, sel)
			for _, d := range unexercised {
				fmt.Fprintln(c.App.ErrWriter, d.String())
			}
			results, err := flowtest.Run(c.Context, flowtest.Options{Pool: db.Pool, Project: project, Logger: logger,
				Run: sel, Parallel: c.Int("parallel"), Timeout: c.Duration("timeout"), Namespace: ns}, files)
			if err != nil {
				return err
			}
			passed, failed := 0, 0
			for _, r := range results {
				if r.Passed {
					passed++
				} else {
					failed++
				}
			}
			if c.String("output") == "json" {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if results == nil {
					results = []flowtest.Result{}
				}
				warnings := make([]string, len(unexercised))
				for i, d := range unexercised {
					warnings[i] = d.String()
				}
				if err := enc.Encode(map[string]any{"tests": results, "passed": passed, "failed": failed, "warnings": warnings}); err != nil {
					return err
				}
			} else {
				printResults(c.App.Writer, results, passed, failed, len(paths))
			}
			if failed > 0 {
				return cli.Exit("", exitFailure)
			}
			return nil
		},
	}
}

// printResults writes results as go test does: a line per test, each
// failure indented under its test with its diff, the counts last.
func printResults(w io.Writer, results []flowtest.Result, passed, failed, files int) {
	for _, r := range results {
		status := "PASS"
		if !r.Passed {
			status = "FAIL"
		}
		fmt.Fprintf(w, "--- %s: %s (%.2fs)\n", status, r.Name, r.Elapsed.Seconds())
		for _, f := range r.Failures {
			where := f.At
			if f.Path != "" {
				where += ": " + f.Path
			}
			fmt.Fprintf(w, "    %s: %s\n", where, f.Message)
			if f.Diff != "" {
				fmt.Fprintf(w, "        --- want\n        +++ got\n")
				for _, l := range strings.Split(f.Diff, "\n") {
					fmt.Fprintf(w, "        %s\n", l)
				}
			}
		}
	}
	if len(results) == 0 {
		fmt.Fprintf(w, "no tests to run (%d fixture file(s) under tests/)\n", files)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
}
