package workflow

import (
	"fmt"
	"strings"

	"github.com/rflow-dev/rflow/trigger"
)

// Summary describes the project in one line for `rflow validate`:
// "3 workflows (2 event, 1 cron), 11 steps".
func (p *Project) Summary() string {
	counts := map[trigger.Kind]int{}
	steps := 0
	for _, w := range p.Workflows {
		counts[w.Trigger.Kind]++
		walkSteps(w.allLists(), func(*Step) { steps++ })
	}
	var kinds []string
	for _, k := range trigger.Kinds() {
		if counts[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	out := plural(len(p.Workflows), "workflow")
	if len(kinds) > 0 {
		out += " (" + strings.Join(kinds, ", ") + ")"
	}
	return out + ", " + plural(steps, "step")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
