package jobs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rflow-dev/rflow/workflow"
)

// Sections of a workflow a step can belong to.
const (
	sectionSteps   = "steps"
	sectionFinally = "finally"
	// sectionReorg is on_reorg:, the steps of a run's reorg response.
	sectionReorg = "on_reorg"
)

// plan is a compiled workflow indexed for execution: every step knows its
// list, its place in it and its enclosing foreach.
type plan struct {
	wf    *workflow.Workflow
	nodes map[string]*node
	// waits: some step is a wait_for, so a run that ends cancels its
	// live waits (flush).
	waits bool
}

type node struct {
	step    *workflow.Step
	list    []*workflow.Step
	index   int
	parent  *node // enclosing foreach step; nil at the top level
	section string
	depth   int // number of enclosing foreach steps
}

func newPlan(wf *workflow.Workflow) *plan {
	p := &plan{wf: wf, nodes: map[string]*node{}}
	p.index(wf.Steps, nil, sectionSteps)
	p.index(wf.Finally, nil, sectionFinally)
	p.index(wf.OnReorg, nil, sectionReorg)
	for _, n := range p.nodes {
		p.waits = p.waits || n.step.WaitFor != nil
	}
	return p
}

func (p *plan) index(list []*workflow.Step, parent *node, section string) {
	depth := 0
	if parent != nil {
		depth = parent.depth + 1
	}
	for i, s := range list {
		n := &node{step: s, list: list, index: i, parent: parent, section: section, depth: depth}
		p.nodes[s.ID] = n
		if s.Foreach != nil {
			p.index(s.Foreach.Steps, n, section)
		}
	}
}

// first returns the first step of a section, or nil when it is empty.
func (p *plan) first(section string) *node {
	list := p.wf.Steps
	switch section {
	case sectionFinally:
		list = p.wf.Finally
	case sectionReorg:
		list = p.wf.OnReorg
	}
	if len(list) == 0 {
		return nil
	}
	return p.nodes[list[0].ID]
}

// next returns the step after n in its list, or nil at the end of the list.
func (p *plan) next(n *node) *node {
	if n.index+1 < len(n.list) {
		return p.nodes[n.list[n.index+1].ID]
	}
	return nil
}

// loc is a place in a run: a step plus the item indexes of its enclosing
// foreach steps (outermost first).
type loc struct {
	n     *node
	items []int
}

// stepKey is the journal key of a step execution: the step id, one [i] per
// enclosing foreach item, and @epoch after goto jumps so a revisited step
// journals afresh.
func stepKey(id string, items []int, epoch int) string {
	var b strings.Builder
	b.WriteString(id)
	for _, i := range items {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(']')
	}
	if epoch > 0 {
		b.WriteByte('@')
		b.WriteString(strconv.Itoa(epoch))
	}
	return b.String()
}

// parseKey splits a journal key into step id, item indexes and epoch.
func parseKey(key string) (id string, items []int, epoch int, err error) {
	rest := key
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		if epoch, err = strconv.Atoi(rest[i+1:]); err != nil {
			return "", nil, 0, fmt.Errorf("bad step key %q", key)
		}
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '['); i >= 0 {
		id = rest[:i]
		for _, part := range strings.Split(strings.TrimSuffix(rest[i+1:], "]"), "][") {
			n, err := strconv.Atoi(part)
			if err != nil {
				return "", nil, 0, fmt.Errorf("bad step key %q", key)
			}
			items = append(items, n)
		}
		return id, items, epoch, nil
	}
	return rest, nil, epoch, nil
}
