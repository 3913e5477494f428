package ozimport

import (
	"fmt"
	"sort"
	"strings"
)

// Finding is one part of the Monitor configuration that the project does
// not carry as it was: LeftOut when it is missing from the project (the
// import fails without --partial), otherwise a difference in how rflow does
// the same thing.
type Finding struct {
	Monitor string // "" for a network or trigger file on its own
	File    string // the Monitor file, relative to the configuration directory
	What    string
	Instead string // what to do instead
	LeftOut bool
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.File)
	if f.Monitor != "" {
		fmt.Fprintf(&b, " (monitor %q)", f.Monitor)
	}
	b.WriteString(": ")
	b.WriteString(f.What)
	if f.Instead != "" {
		b.WriteString(": ")
		b.WriteString(f.Instead)
	}
	return b.String()
}

// dedupe drops repeats (a trigger shared by several workflows of a monitor
// is reported once) and keeps first-seen order.
func dedupe(fs []Finding) []Finding {
	seen := map[Finding]bool{}
	out := fs[:0:0]
	for _, f := range fs {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// importMD renders IMPORT.md: what was written, and per monitor what was
// left out and what works differently, each with what to do instead.
func importMD(r *Result, cfg *Config) []byte {
	var b strings.Builder
	b.WriteString("# Imported from OpenZeppelin Monitor\n\n")
	fmt.Fprintf(&b, "`rflow import oz-monitor %s` wrote this project: %d network(s), %d contract(s), %d workflow(s)",
		cfg.Dir, len(r.Networks), r.Contracts, len(r.Workflows))
	if r.PausedWorkflows > 0 {
		fmt.Fprintf(&b, " (%d of them from paused monitors)", r.PausedWorkflows)
	}
	b.WriteString(".\n\n")
	left := r.LeftOut()
	if len(left) == 0 {
		b.WriteString("Everything in the configuration was carried over.\n\n")
	} else {
		fmt.Fprintf(&b, "**%d part(s) of the configuration have no rflow equivalent and were left out**; each is listed below with what to do instead.\n\n", len(left))
	}
	b.WriteString("Run it:\n\n```sh\ncp .env.example .env     # fill in the values\nset -a; . ./.env; set +a  # export them\nrflow validate -c rflow.yaml\nrflow start -c rflow.yaml\n```\n\n")
	if len(r.Workflows) > 0 {
		b.WriteString("## Workflows\n\n| workflow | file | from |\n| --- | --- | --- |\n")
		for _, w := range r.Workflows {
			note := mdEscape(w.Source)
			if w.Paused {
				note += " (paused)"
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", w.Name, w.File, note)
		}
		b.WriteString("\n")
	}
	if r.PausedWorkflows > 0 {
		b.WriteString("Workflows of paused monitors are in `workflows/paused/`, which `rflow.yaml` does not include, so they do not run. To run one, move its file to `workflows/` (or uncomment the include in `rflow.yaml`). rflow's own `rflow workflows pause` holds a deployed workflow's runs instead of skipping its events: resuming it runs what it held.\n\n")
	}
	byMonitor := map[string][]Finding{}
	var order []string
	for _, f := range r.Findings {
		key := f.Monitor
		if _, ok := byMonitor[key]; !ok {
			order = append(order, key)
		}
		byMonitor[key] = append(byMonitor[key], f)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i] != "" && order[j] == "" })
	for _, key := range order {
		fs := byMonitor[key]
		if key == "" {
			b.WriteString("## Networks and triggers\n\n")
		} else {
			fmt.Fprintf(&b, "## Monitor %q\n\n", key)
		}
		writeFindings(&b, "Left out", fs, true)
		writeFindings(&b, "Works differently", fs, false)
	}
	if len(r.Env) > 0 {
		b.WriteString("## Environment\n\nThe project reads these variables (`.env.example` lists them):\n\n")
		for _, e := range r.Env {
			fmt.Fprintf(&b, "- `%s`: %s\n", e.Name, e.Comment)
		}
		b.WriteString("\n")
	}
	b.WriteString("## What rflow adds\n\nEach matching log is one run, exactly once: a restart, a crash or a second process never repeats a completed step, each request carries an `Idempotency-Key` stable across retries, a reorg that removes a log after its run is handled by `on_reorg:` steps, and `rflow start --http` serves the run console at `/ui/`. Monitor sent one notification per transaction listing its matched events; rflow runs once per matching log. See docs/import.md in the rflow repository.\n")
	return []byte(b.String())
}

func writeFindings(b *strings.Builder, title string, fs []Finding, leftOut bool) {
	n := 0
	for _, f := range fs {
		if f.LeftOut == leftOut {
			n++
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(b, "%s:\n\n", title)
	for _, f := range fs {
		if f.LeftOut != leftOut {
			continue
		}
		fmt.Fprintf(b, "- %s (`%s`)", mdEscape(f.What), f.File)
		if f.Instead != "" {
			fmt.Fprintf(b, "\n  Instead: %s", mdEscape(f.Instead))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// mdEscape keeps user text from opening Markdown constructs in IMPORT.md.
func mdEscape(s string) string {
	return strings.NewReplacer("`", "\\`", "*", "\\*", "_", "\\_", "<", "&lt;", "|", "\\|").Replace(s)
}

// envExample renders .env.example: every variable with what it is.
func envExample(env []EnvVar) []byte {
	var b strings.Builder
	b.WriteString("# Variables the imported project reads as ${NAME}. Copy to .env, fill in, export.\n")
	for _, e := range env {
		fmt.Fprintf(&b, "\n# %s\n%s=%s\n", e.Comment, e.Name, e.Example)
	}
	return []byte(b.String())
}
