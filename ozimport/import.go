package ozimport

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Options tune Import.
type Options struct {
	// Force writes into a directory that is not empty, replacing files of
	// the same names.
	Force bool
}

// Result is what Import wrote and what it could not carry over.
type Result struct {
	Dir             string
	Files           []string // written, relative to Dir
	Networks        []string
	Contracts       int
	Workflows       []WorkflowInfo
	PausedWorkflows int
	Env             []EnvVar
	Findings        []Finding
}

// WorkflowInfo names one written workflow and where it came from.
type WorkflowInfo struct {
	Name   string
	File   string // relative to Dir
	Source string // the Monitor monitor and condition it came from
	Paused bool
}

// LeftOut returns the findings for parts of the configuration the project
// does not carry; a caller fails the import when there are any, unless
// the user accepts a partial import.
func (r *Result) LeftOut() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.LeftOut {
			out = append(out, f)
		}
	}
	return out
}

// Import converts the OpenZeppelin Monitor configuration under src into an
// rflow project in dst (rflow.yaml, abis/, workflows/, .env.example and
// IMPORT.md) and checks that the project validates. An unreadable or
// invalid input file is an *InputError and nothing is written.
func Import(src, dst string, opts Options) (*Result, error) {
	cfg, err := ReadConfig(src)
	if err != nil {
		return nil, err
	}
	b := newBuilder(cfg)
	for _, m := range cfg.Monitors {
		if err := b.checkTriggers(m); err != nil {
			return nil, err
		}
		if err := b.convertMonitor(m); err != nil {
			return nil, err
		}
	}
	for _, f := range unusedFilters(cfg) {
		b.note(f, "", "filter script "+f+" is used by no monitor's trigger_conditions", "not imported: rflow runs no scripts", false)
	}
	for _, t := range unusedTriggers(cfg) {
		b.note(t.File, "", fmt.Sprintf("trigger %s is used by no monitor", t.ID), "not written; a monitor that names it gets it as a step", false)
	}
	project := b.projectFile(projectName(dst))
	r := &Result{Dir: dst, Contracts: len(b.contracts), Env: b.env, Findings: dedupe(b.findings)}
	for _, n := range cfg.Networks {
		if n.isEVM() {
			r.Networks = append(r.Networks, networkName(n.Slug))
		}
	}
	files := []outFile{{"rflow.yaml", project}}
	for _, w := range b.workflows {
		files = append(files, outFile{w.path, w.body})
		r.Workflows = append(r.Workflows, WorkflowInfo{Name: w.name, File: w.path, Source: w.source, Paused: w.paused})
		if w.paused {
			r.PausedWorkflows++
		}
	}
	for _, path := range sortedKeys(b.abis) {
		files = append(files, outFile{path, b.abis[path]})
	}
	files = append(files, outFile{".env.example", envExample(b.env)}, outFile{"IMPORT.md", importMD(r, cfg)})
	if r.Files, err = writeFiles(dst, files, opts.Force); err != nil {
		return r, err
	}
	if err := validate(dst, r); err != nil {
		return r, err
	}
	return r, nil
}

// projectFile renders rflow.yaml.
func (b *builder) projectFile(name string) []byte {
	var nets ylist
	used := map[*Network]bool{}
	for _, n := range b.networks {
		used[n] = true
	}
	for _, n := range b.cfg.Networks {
		switch {
		case !n.isEVM():
			b.note(n.File, "", fmt.Sprintf("network %s: a %s network", n.Slug, n.NetworkType),
				"not written: rflow watches EVM chains only; keep running Monitor for it", true)
		case used[n]:
			nets = append(nets, yitem{val: b.convertNetwork(n)})
		default:
			nets = append(nets, yitem{val: b.convertNetwork(n), comment: "No imported monitor watches this network yet."})
		}
	}
	active, paused := 0, 0
	for _, w := range b.workflows {
		if w.paused {
			paused++
		} else {
			active++
		}
	}
	m := ymap{}.add("name", name, "The project name keys rflow's locks and its embedded database.")
	if len(nets) > 0 {
		m = m.add("networks", nets, "")
	}
	if len(b.contracts) > 0 {
		m = m.add("contracts", b.contracts, "One contract per address a monitor watches.")
	}
	if active > 0 {
		m = m.add("workflows", ylist{{val: ymap{}.add("include", "workflows/*.yaml", "")}}, "One workflow per (monitor, event condition, contract).")
	}
	header := fmt.Sprintf("rflow project imported from the OpenZeppelin Monitor configuration in %s\nby `rflow import oz-monitor`. IMPORT.md lists what was carried over, what was\nleft out and what works differently; .env.example the variables it reads.\nReference: docs/workflows.md in the rflow repository.", b.cfg.Dir)
	out := renderYAML(header, m)
	if paused > 0 {
		prefix := "workflows:\n"
		if active > 0 {
			prefix = ""
		}
		out = append(out, []byte("\n# Workflows of paused monitors: include them to run them.\n"+commentOut(prefix)+"#   - include: workflows/paused/*.yaml\n")...)
	}
	return out
}

func commentOut(s string) string {
	if s == "" {
		return ""
	}
	return "# " + s
}

// unusedFilters lists the scripts under filters/ that no trigger_conditions
// entry names (those that are named are reported with their monitor).
func unusedFilters(cfg *Config) []string {
	var out []string
	for _, f := range cfg.Filters {
		used := false
		for _, m := range cfg.Monitors {
			for _, raw := range m.TriggerConditions {
				var sc scriptCondition
				if json.Unmarshal(raw, &sc) == nil && strings.HasSuffix(filepath.ToSlash(sc.ScriptPath), f) {
					used = true
				}
			}
		}
		if !used {
			out = append(out, f)
		}
	}
	return out
}

func unusedTriggers(cfg *Config) []*Trigger {
	used := map[string]bool{}
	for _, m := range cfg.Monitors {
		for _, id := range m.Triggers {
			used[id] = true
		}
	}
	var out []*Trigger
	for _, id := range sortedKeys(cfg.Triggers) {
		if !used[id] {
			out = append(out, cfg.Triggers[id])
		}
	}
	return out
}

// projectName makes the project name from the output directory.
func projectName(dst string) string {
	abs, err := filepath.Abs(dst)
	if err != nil {
		abs = dst
	}
	return rflowName(filepath.Base(abs))
}
