package flowtest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/flowtest"
	"github.com/rflow-dev/rflow/workflow"
)

// Bad fixtures are diagnostics at file:line:col, every one of them.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"syntax", "tests: [\n", "x.test.yaml:"},
		{"no tests", "workflow: w\n", "x.test.yaml:1:1: missing tests:"},
		{"unknown key", "tests:\n  - name: a\n    workflow: w\n    given: { manual: {} }\n    expect: { runs: 1 }\n    expcet: {}\n",
			"x.test.yaml:6:5: unknown key \"expcet\" in test"},
		{"two kinds", "tests:\n  - name: a\n    workflow: w\n    given: { manual: {}, cron: \"2026-01-01T00:00:00Z\" }\n    expect: { runs: 1 }\n",
			"x.test.yaml:4:26: one occurrence has one kind: manual and cron"},
		{"bad status", "workflow: w\ntests:\n  - name: a\n    given: { manual: {} }\n    expect: { status: done }\n",
			"x.test.yaml:5:23: status \"done\" is not a run status"},
		{"bad http status", "workflow: w\ntests:\n  - name: a\n    given: { manual: {} }\n    http: [ { status: 99 } ]\n    expect: { runs: 1 }\n",
			"x.test.yaml:5:23: status must be an HTTP status code"},
		{"duplicate name", "workflow: w\ntests:\n  - { name: a, given: { manual: {} }, expect: { runs: 1 } }\n  - { name: a, given: { manual: {} }, expect: { runs: 1 } }\n",
			"x.test.yaml:4:5: duplicate test name \"a\" (first at x.test.yaml:3:5)"},
		{"runs and shorthand", "workflow: w\ntests:\n  - { name: a, given: { manual: {} }, expect: { runs: 1, status: completed } }\n",
			"give runs: or the single run's"},
		{"no workflow", "tests:\n  - { name: a, given: { manual: {} }, expect: { runs: 1 } }\n", "x.test.yaml:2:5: test \"a\": no workflow:"},
		{"duplicate key", "workflow: w\nworkflow: v\ntests: []\n", "x.test.yaml:2:1: invalid YAML: mapping key \"workflow\" already defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := flowtest.Parse("x.test.yaml", []byte(tc.src))
			var ds workflow.Diagnostics
			require.True(t, errors.As(err, &ds), "%v", err)
			require.Contains(t, err.Error(), tc.want)
			for _, d := range ds {
				require.NotZero(t, d.Pos.Line, d.String())
			}
		})
	}
}

// The fixture the scaffold writes, and the testdata seeds, parse.
func TestParseSeeds(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.test.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, p := range files {
		f, err := flowtest.ParseFile(p)
		if strings.Contains(p, "bad") {
			require.Error(t, err, p)
			continue
		}
		require.NoError(t, err, p)
		require.NotEmpty(t, f.Tests, p)
	}
}

// FuzzParse: no input makes the parser panic, and every error it returns
// names a place.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.test.yaml"))
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte("tests: [ { name: a, workflow: w, given: [ { event: { x: 1 } } ], expect: { runs: [ { steps: { ran: [a] } } ] } } ]"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := flowtest.Parse("f.test.yaml", src)
		if err != nil {
			var ds workflow.Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is not diagnostics: %v", err)
			}
			for _, d := range ds {
				if !strings.HasPrefix(d.Pos.String(), "f.test.yaml") {
					t.Fatalf("diagnostic without the file: %s", d)
				}
			}
			return
		}
		if file == nil {
			t.Fatal("no file and no error")
		}
	})
}
