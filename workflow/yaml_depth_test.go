package workflow

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Deep nesting is refused before the YAML library builds anything, with
// its position, and with memory proportional to the input.
func TestDeepYAMLRefusedWhileScanning(t *testing.T) {
	t.Parallel()
	deepMap := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat(" ", i) + "k:\n")
		}
		return b.String()
	}
	cases := map[string]struct {
		src       string
		line, col int
	}{
		"40 KB of brackets":      {strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000), 1, 201},
		"200 KB of brackets":     {"name: w\nsteps: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), 2, 207},
		"flow mappings":          {strings.Repeat("{a: ", 5_000) + strings.Repeat("}", 5_000), 1, 801},
		"json arrays in objects": {strings.Repeat(`{"a":[`, 3_000), 1, 601},
		"block sequences":        {strings.Repeat("- ", 50_000) + "x\n", 1, 401},
		"block mappings":         {deepMap(300), 201, 201},
		"after a block scalar":   {"a: |\n  [[[[\n  {{{{\nb: " + strings.Repeat("[", 300), 4, 203},
	}
	for name, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, ds := parseYAML("wf.yaml", []byte(c.src))
		runtime.ReadMemStats(&after)
		require.Len(t, ds, 1, name)
		require.Equal(t, Position{File: "wf.yaml", Line: c.line, Col: c.col}, ds[0].Pos, name)
		require.Contains(t, ds[0].Message, "nested too deeply (more than 200 levels)", name)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(20*len(c.src)+1<<20), "%s: memory", name)
	}
}

// Brackets that do not nest (in quoted and plain scalars, comments, block
// scalars) are not counted: a document at depth 200 with thousands of
// them parses.
func TestYAMLDepthCountsOnlyNesting(t *testing.T) {
	t.Parallel()
	many := strings.Repeat("[{", 500)
	var b strings.Builder
	b.WriteString("a: \"" + many + "\"\n")
	b.WriteString("b: '" + many + "''" + many + "'\n")
	b.WriteString("c: x" + many + "\n")
	b.WriteString("d: 1 # " + many + "\n")
	b.WriteString("e: |\n  " + many + "\n  " + many + "\n")
	b.WriteString("f: >-\n  " + many + "\n")
	b.WriteString("g: \"multi\n  " + many + " line\"\n")
	b.WriteString("h: " + strings.Repeat("[", 199) + strings.Repeat("]", 199) + "\n")
	b.WriteString("i:\n  - - - [x, \"]]]]\", '[[[[', {k: v}]\n")
	require.Nil(t, checkYAMLDepth("x.yaml", []byte(b.String())))
	docs, ds := parseYAML("x.yaml", []byte(b.String()))
	require.Empty(t, ds)
	require.Len(t, docs, 1)
}
