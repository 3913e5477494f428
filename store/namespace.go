package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/riverqueue/river"
)

// Several projects (the `name:` of rflow.yaml) can share one database, and
// each is a namespace of its own: a workflow W of project P is stored as
// "P.W", a name no local workflow name can spell ('.' is not allowed in
// one), except in the database's home project (rflow.projects, prefix ''),
// whose workflows keep their bare names. So a database that only ever held
// one project is exactly what it was before projects existed: its names,
// trigger keys, budgets and River jobs are untouched. Everything keyed by a
// workflow name (runs, claims, budgets, rate-limit windows, approvals,
// cursors, tombstones, deploy records) is then apart per project without a
// column of its own. This file is the one place that knows the shape; a
// Namespace qualifies names going in and unqualifies them coming out.

// projectSeparator joins a non-home project's name and a workflow name.
const projectSeparator = "."

// Namespace is one project's share of the database. The zero value is the
// home namespace (bare names, River's default queue), which is what every
// single-project database is.
type Namespace struct {
	// Project is the project's name ("" for an unnamed project, which can
	// only be the home project).
	Project string
	// prefix starts every stored workflow name of the project: "" for the
	// home project, "<Project>." otherwise.
	prefix string
}

// HomeNamespace is the namespace of the database's home project.
func HomeNamespace(project string) Namespace { return Namespace{Project: project} }

// projectNamespace is the namespace of a project that is not the home
// project of its database.
func projectNamespace(project string) Namespace {
	return Namespace{Project: project, prefix: project + projectSeparator}
}

// Home reports whether ns is the home project's: its workflows have bare
// names and its jobs run in River's default queue.
func (ns Namespace) Home() bool { return ns.prefix == "" }

// Qualify is the stored name of the project's workflow local.
func (ns Namespace) Qualify(local string) string { return ns.prefix + local }

// Local is the project's own name of a stored workflow name, and whether
// the stored name is one of the project's (a rehearsal's name is not).
func (ns Namespace) Local(stored string) (string, bool) {
	if !ns.Owns(stored) {
		return stored, false
	}
	return strings.TrimPrefix(stored, ns.prefix), true
}

// Owns reports whether stored is the name of a live workflow of ns.
func (ns Namespace) Owns(stored string) bool {
	if IsRehearsal(stored) {
		return false
	}
	if ns.Home() {
		return !strings.Contains(stored, projectSeparator)
	}
	return strings.HasPrefix(stored, ns.prefix)
}

// Queue is the River queue the project's live jobs go to, and the only one
// its processes work: River's default queue for the home project, a queue
// of the project's own for any other (ProjectQueue).
func (ns Namespace) Queue() string {
	if ns.Home() {
		return river.QueueDefault
	}
	return ProjectQueue(ns.Project)
}

// filter is a SQL condition on a column holding a stored workflow name:
// true for a live workflow of ns. The project name is spliced as a literal
// only after ValidProjectName accepted it (letters, digits, '_' and '-'), so
// it cannot end the string; starts_with is used rather than LIKE, where
// '_' would be a wildcard.
func (ns Namespace) filter(col string) string {
	if ns.Home() {
		// One negated regex, like notRehearsal's alone: the planner
		// estimates it as it did before projects existed, so the listing
		// plans of a single-project database do not change.
		return col + ` !~ '` + rehearsalPrefix + `|[.]'`
	}
	return fmt.Sprintf("starts_with(%s, '%s')", col, ns.prefix)
}

// filterWithRehearsals is filter, widened to the project's rehearsals
// (whose names end in the rehearsed workflow's stored name).
func (ns Namespace) filterWithRehearsals(col string) string {
	if ns.Home() {
		return col + ` !~ '[.]'`
	}
	return fmt.Sprintf("(%s OR %s ~ '%s%s[.]')", ns.filter(col), col, rehearsalPrefix, ns.Project)
}

// LocalRun shows run, read by id, as one of ns's: under its local name, or
// ErrNotFound when it is another project's (a project never sees, retries
// or cancels another's runs). A rehearsal's run is shown as it is.
func (ns Namespace) LocalRun(run *Run) error {
	if IsRehearsal(run.Workflow) {
		return nil
	}
	local, ok := ns.Local(run.Workflow)
	if !ok {
		return fmt.Errorf("run %s is not a run of %s: %w", run.ID, ns.Describe(), ErrNotFound)
	}
	run.Workflow = local
	return nil
}

// LocalApproval is LocalRun for an approval gate read by id.
func (ns Namespace) LocalApproval(ap *Approval) error {
	if IsRehearsal(ap.Workflow) {
		return nil
	}
	local, ok := ns.Local(ap.Workflow)
	if !ok {
		return fmt.Errorf("approval %s is not one of %s's: %w", ap.ID, ns.Describe(), ErrNotFound)
	}
	ap.Workflow = local
	return nil
}

// Describe names the namespace for messages.
func (ns Namespace) Describe() string {
	switch {
	case ns.Project == "":
		return "the unnamed home project"
	case ns.Home():
		return "project " + ns.Project + " (the database's home project)"
	}
	return "project " + ns.Project
}

// projectNamePattern is the shape rflow.yaml's name: has (workflow.Load).
var projectNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,99}$`)

// ValidProjectName refuses a name that cannot be a namespace other than the
// home one: it must have the shape of rflow.yaml's name:, and must not
// contain "__", or its stored names would read as a rehearsal's
// (<kind>_<session>__<workflow>).
func ValidProjectName(name string) error {
	if !projectNamePattern.MatchString(name) {
		return fmt.Errorf("project name %q: want a letter, then up to 99 letters, digits, '_' or '-'", name)
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("project name %q contains \"__\", which only a replay's or a test's workflow names may: rename the project to share this database", name)
	}
	return nil
}

// ProjectOf splits a stored workflow name into its project's part and the
// local name. A bare name is the home project's: project is "" then. A
// rehearsal's name is split by the live workflow it rehearses.
func ProjectOf(stored string) (project, local string) {
	name := stored
	if r, ok := ParseRehearsal(stored); ok {
		name = r.Workflow
	}
	if p, l, ok := strings.Cut(name, projectSeparator); ok {
		return p, l
	}
	return "", name
}

// ProjectQueue is the River queue of a project that is not its database's
// home project. River allows lower-case letters and digits joined by single
// '_' or '-'; a name already of that shape is used as it is, and any other
// (upper case, a doubled or trailing separator) is folded to it and gets a
// short hash of its exact spelling, so "Ops" and "ops" are two queues. The
// "project_" start keeps it apart from the rehearsal queues (replay_…,
// test_…) and River's default.
func ProjectQueue(project string) string {
	var b strings.Builder
	run := ""
	for _, r := range project {
		if r == '_' || r == '-' {
			run += string(r)
			continue
		}
		if run != "" && b.Len() > 0 {
			if len(run) > 1 {
				run = "_"
			}
			b.WriteString(run)
		}
		run = ""
		b.WriteRune(unicode.ToLower(r))
	}
	slug := b.String()
	if slug != project {
		sum := sha256.Sum256([]byte(project))
		slug += "_" + hex.EncodeToString(sum[:4])
	}
	return "project_" + slug
}
