package flowtest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/workflow"
)

// Failure is one expectation that did not hold, at its place in the
// fixture, with a diff of what was wanted against what came out.
type Failure struct {
	Pos     workflow.Position `json:"-"`
	At      string            `json:"at"`
	Path    string            `json:"path,omitempty"`
	Message string            `json:"message"`
	Diff    string            `json:"diff,omitempty"`
}

// match compares got against want: a mapping checks only the keys it
// names; lists compare item by item and by length; numbers by value
// (a numeric string equals the number it spells); 0x strings ignore case
// (addresses' checksums). A key "error" holds text the actual error must
// contain.
func match(w fixture.Want, base, path string, want, got any, out *[]Failure) {
	pos := w.Pos
	if p, ok := w.At[strings.TrimPrefix(strings.TrimPrefix(path, base), ".")]; ok {
		pos = p
	}
	fail := func(msg string) {
		*out = append(*out, Failure{Pos: pos, At: pos.String(), Path: path, Message: msg, Diff: diff(want, got)})
	}
	switch wv := want.(type) {
	case map[string]any:
		gv, ok := got.(map[string]any)
		if !ok {
			fail(fmt.Sprintf("want a mapping, got %s", describe(got)))
			return
		}
		for _, k := range slices.Sorted(mapKeys(wv)) {
			g, present := gv[k]
			p := fixture.Join(path, k)
			if !present {
				pos := w.Pos
				if pp, ok := w.At[strings.TrimPrefix(strings.TrimPrefix(p, base), ".")]; ok {
					pos = pp
				}
				*out = append(*out, Failure{Pos: pos, At: pos.String(), Path: p, Message: "missing", Diff: diff(wv[k], nil)})
				continue
			}
			if k == "error" {
				ws, _ := wv[k].(string)
				gs, _ := g.(string)
				if !strings.Contains(gs, ws) {
					pos := w.Pos
					if pp, ok := w.At[strings.TrimPrefix(strings.TrimPrefix(p, base), ".")]; ok {
						pos = pp
					}
					*out = append(*out, Failure{Pos: pos, At: pos.String(), Path: p,
						Message: fmt.Sprintf("error does not contain %q", ws), Diff: diff(ws, g)})
				}
				continue
			}
			match(w, base, p, wv[k], g, out)
		}
	case []any:
		gv, ok := got.([]any)
		if !ok {
			fail(fmt.Sprintf("want a list, got %s", describe(got)))
			return
		}
		if len(gv) != len(wv) {
			fail(fmt.Sprintf("want %d item(s), got %d", len(wv), len(gv)))
			return
		}
		for i := range wv {
			match(w, base, fmt.Sprintf("%s[%d]", path, i), wv[i], gv[i], out)
		}
	default:
		if !scalarEqual(want, got) {
			fail(fmt.Sprintf("want %s, got %s", text(want), text(got)))
		}
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func scalarEqual(want, got any) bool {
	if wn, ok := number(want); ok {
		gn, ok := number(got)
		return ok && wn.Cmp(gn) == 0
	}
	ws, wok := want.(string)
	gs, gok := got.(string)
	if wok && gok {
		if strings.HasPrefix(ws, "0x") && strings.HasPrefix(gs, "0x") {
			return strings.EqualFold(ws, gs)
		}
		return ws == gs
	}
	return want == got
}

// number reads a json.Number, or a string that spells a decimal number.
func number(v any) (*big.Rat, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
		if s == "" || strings.HasPrefix(s, "0x") {
			return nil, false
		}
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return text(v)
}

func text(v any) string {
	if v == nil {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// diff shows want against got as indented JSON, line by line: "-" lines
// are wanted and missing, "+" lines came out instead. Scalars give no diff
// (the message says it all).
func diff(want, got any) string {
	_, wc := want.(map[string]any)
	_, wl := want.([]any)
	_, gc := got.(map[string]any)
	_, gl := got.([]any)
	if !wc && !wl && !gc && !gl {
		return ""
	}
	a, b := lines(want), lines(project(want, got))
	// Longest common subsequence, fine for the small documents tests hold.
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			sb.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			sb.WriteString("- " + a[i] + "\n")
			i++
		default:
			sb.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return strings.TrimRight(sb.String(), "\n")
}

func lines(v any) []string {
	if v == nil {
		return []string{"(nothing)"}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return []string{fmt.Sprint(v)}
	}
	return strings.Split(string(b), "\n")
}

// project keeps of got only what want checks (the keys a mapping names),
// so a diff shows the checked parts.
func project(want, got any) any {
	switch wv := want.(type) {
	case map[string]any:
		gv, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for k, w := range wv {
			if g, ok := gv[k]; ok {
				out[k] = project(w, g)
			}
		}
		return out
	case []any:
		gv, ok := got.([]any)
		if !ok {
			return got
		}
		out := make([]any, len(gv))
		for i, g := range gv {
			if i < len(wv) {
				out[i] = project(wv[i], g)
			} else {
				out[i] = g
			}
		}
		return out
	}
	return got
}
