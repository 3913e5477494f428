package flowtest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/workflow"
)

// Unexercised warns, once per gated send of a workflow the selected tests
// of files run, that rflow test does not exercise its approval: a test
// captures the send as if it were approved, so required:, timeout:,
// on_timeout: (reject or proceed) and notify: behave as nothing of the
// live gate, and an advance: past the timeout expires nothing. A test that
// expected the live behaviour would otherwise pass or fail for a reason
// it cannot see. Each warning is at the step, file:line:col, as validate
// reports.
func Unexercised(p *workflow.Project, files []*fixture.File, sel *regexp.Regexp) workflow.Diagnostics {
	type tested struct {
		files   []string
		advance bool
	}
	byWorkflow := map[string]*tested{}
	var order []string
	for _, f := range files {
		for _, t := range f.Tests {
			if sel != nil && !sel.MatchString(t.Name) {
				continue
			}
			w := byWorkflow[t.Workflow]
			if w == nil {
				w = &tested{}
				byWorkflow[t.Workflow] = w
				order = append(order, t.Workflow)
			}
			if !slices.Contains(w.files, f.Path) {
				w.files = append(w.files, f.Path)
			}
			for _, o := range t.Given {
				w.advance = w.advance || o.Advance > 0
			}
		}
	}
	var out workflow.Diagnostics
	for _, name := range order {
		wf := p.Workflow(name)
		if wf == nil {
			continue // the run reports the unknown workflow
		}
		t := byWorkflow[name]
		for _, s := range wf.GatedSends() {
			a := s.Send.Approval
			onTimeout := a.OnTimeout
			if onTimeout == "" {
				onTimeout = "reject"
			}
			msg := fmt.Sprintf("rflow test does not exercise the approval: of step %s (timeout %s, on_timeout: %s): "+
				"its send is captured as if approved at once, whatever required: says", s.ID, duration(a.Timeout), onTimeout)
			if t.advance {
				msg += ", and an advance: past the timeout does not expire it"
			}
			msg += fmt.Sprintf(" (tested by %s; see docs/testing.md#limits)", strings.Join(t.files, ", "))
			out = append(out, workflow.Diagnostic{Pos: s.Pos, Severity: workflow.SeverityWarning, Message: msg})
		}
	}
	return out
}

// duration prints d as a fixture writes it: 1h, 90m, 1h30m (not 1h0m0s).
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
