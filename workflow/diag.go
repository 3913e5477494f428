package workflow

import (
	"fmt"
	"sort"
	"strings"
)

// Position is a place in a project file. Line and Col are 1-based; a zero
// Line means the position is unknown (for example a Spec read back from the
// database).
type Position struct {
	File      string
	Line, Col int
}

// String renders the position as "file:line:col", the form editors jump to.
func (p Position) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Severity tells an error (the project cannot run) from a warning (it can,
// but probably not the way its author expects).
type Severity int

const (
	// SeverityError makes Load fail.
	SeverityError Severity = iota
	// SeverityWarning is reported but does not fail Load unless Strict is set.
	SeverityWarning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem found in a project, with where it is.
type Diagnostic struct {
	Pos      Position
	Severity Severity
	Message  string
}

// String renders "file:line:col: message", with "warning: " before the
// message of a warning.
func (d Diagnostic) String() string {
	if d.Severity == SeverityWarning {
		return d.Pos.String() + ": warning: " + d.Message
	}
	return d.Pos.String() + ": " + d.Message
}

// Diagnostics is every problem found in a project. It is the error Load
// returns when a project is invalid, so callers can print every line instead
// of stopping at the first.
type Diagnostics []Diagnostic

// Error joins every diagnostic, one per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any diagnostic is an error (not a warning).
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(SeverityError) }

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(SeverityWarning) }

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// sortDiagnostics orders diagnostics by file, line and column so output is
// stable whatever order the checks ran in.
func sortDiagnostics(ds Diagnostics) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// diags collects diagnostics while a project is checked.
type diags struct {
	all Diagnostics
}

func (d *diags) errorf(pos Position, format string, args ...any) {
	d.all = append(d.all, Diagnostic{Pos: pos, Severity: SeverityError, Message: fmt.Sprintf(format, args...)})
}

func (d *diags) warnf(pos Position, format string, args ...any) {
	d.all = append(d.all, Diagnostic{Pos: pos, Severity: SeverityWarning, Message: fmt.Sprintf(format, args...)})
}

// suggest returns "; did you mean X?" when one of candidates is close to
// name, or "" when none is.
func suggest(name string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if bestDist < 0 || d < bestDist || (d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	if best == "" || best == name {
		return ""
	}
	limit := max(1, (len(name)+2)/3)
	if bestDist <= limit || strings.EqualFold(best, name) {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
