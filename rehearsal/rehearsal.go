// Package rehearsal names the workflow namespaces that replays and workflow
// tests run under, so that what they claim and journal can never be taken
// for a live workflow's: test_<uuid>__<workflow> (and the replay's
// replay_<session>__<workflow>). A live workflow's name can never contain
// "__" (workflow.Load refuses it), so the separator alone tells a
// namespaced name from a live one; store relies on that to keep rehearsal
// rows out of every live listing.
package rehearsal

import (
	"strings"

	"github.com/google/uuid"
)

// Separator joins a namespace to the workflow name it rehearses.
const Separator = "__"

// TestName is the namespaced name a workflow test of workflow runs under.
func TestName(id uuid.UUID, workflow string) string {
	return "test_" + id.String() + Separator + workflow
}

// TestKey is a test occurrence's trigger key: prefixed too, so even a
// rehearsal's key never looks like a live one.
func TestKey(id uuid.UUID, key string) string { return "test_" + id.String() + ":" + key }

// Base returns the workflow a namespaced name rehearses, and whether name
// is namespaced at all.
func Base(name string) (string, bool) {
	i := strings.Index(name, Separator)
	if i < 0 {
		return name, false
	}
	return name[i+len(Separator):], true
}

// Namespaced reports whether name is a replay's or a test's, not a live
// workflow's.
func Namespaced(name string) bool { return strings.Contains(name, Separator) }
