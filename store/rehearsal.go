package store

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/riverqueue/river"
)

// A rehearsal (`rflow replay`, `rflow test`) runs a workflow W under a
// namespaced name, <kind>_<session>__<W>, so it never collides with a live
// claim, keeps W's own history clean, and can be pruned without touching a
// live row: live workflow names cannot contain "__" (workflow.Load refuses
// them). This file is the one place that knows the shape.

// RehearsalKind names what a rehearsal is.
type RehearsalKind string

// Rehearsal kinds.
const (
	RehearsalReplay RehearsalKind = "replay"
	RehearsalTest   RehearsalKind = "test"
)

// Rehearsal is one parsed rehearsal workflow name.
type Rehearsal struct {
	Kind    RehearsalKind
	Session string
	// Workflow is the live workflow the rehearsal runs.
	Workflow string
}

// rehearsalName matches <kind>_<session>__<workflow>.
var rehearsalName = regexp.MustCompile(`^(replay|test)_([a-z0-9-]+)__(.+)$`)

// rehearsalPrefix is the start of every rehearsal name, as a POSIX regex
// for SQL (see notRehearsal).
const rehearsalPrefix = `^(replay|test)_[a-z0-9-]+__`

// rehearsalSQL is the same pattern for a SQL `~` match (see notRehearsal).
const rehearsalSQL = `'` + rehearsalPrefix + `'`

// notRehearsal is a SQL condition on a column holding a workflow name: true
// for a live workflow only.
func notRehearsal(col string) string { return col + ` !~ ` + rehearsalSQL }

var sessionPattern = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// ValidSession reports whether s can be a rehearsal session id: lower-case
// letters, digits and -, as River queue names allow.
func ValidSession(s string) error {
	if !sessionPattern.MatchString(s) || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") || strings.Contains(s, "--") {
		return fmt.Errorf("session %q: want 1-64 lower-case letters, digits and single inner dashes", s)
	}
	return nil
}

// Name is the workflow name the rehearsal runs under.
func (r Rehearsal) Name() string {
	return fmt.Sprintf("%s_%s__%s", r.Kind, r.Session, r.Workflow)
}

// Prefix starts every workflow name of the rehearsal's session.
func (r Rehearsal) Prefix() string { return fmt.Sprintf("%s_%s__", r.Kind, r.Session) }

// Queue is the River queue the rehearsal's jobs run in: only the process
// that runs the rehearsal works it, so a live process never executes one.
func (r Rehearsal) Queue() string { return fmt.Sprintf("%s_%s", r.Kind, r.Session) }

// TriggerKey prefixes an occurrence's trigger key, so a rehearsal's key
// can never equal a live claim's, even outside the workflow name.
func (r Rehearsal) TriggerKey(key string) string {
	return fmt.Sprintf("%s:%s:%s", r.Kind, r.Session, key)
}

// ParseRehearsal splits a rehearsal workflow name; ok is false for a live
// workflow's name.
func ParseRehearsal(name string) (Rehearsal, bool) {
	m := rehearsalName.FindStringSubmatch(name)
	if m == nil || ValidSession(m[2]) != nil {
		return Rehearsal{}, false
	}
	return Rehearsal{Kind: RehearsalKind(m[1]), Session: m[2], Workflow: m[3]}, true
}

// IsRehearsal reports whether name is a rehearsal's workflow name.
func IsRehearsal(name string) bool {
	_, ok := ParseRehearsal(name)
	return ok
}

// QueueOf is the River queue a workflow's step jobs go to: the rehearsal's
// own queue for a rehearsal, its project's (Namespace.Queue) for a live
// workflow: River's default queue for the home project's.
func QueueOf(workflow string) string {
	if r, ok := ParseRehearsal(workflow); ok {
		return r.Queue()
	}
	if project, _ := ProjectOf(workflow); project != "" {
		return ProjectQueue(project)
	}
	return river.QueueDefault
}
