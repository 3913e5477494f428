package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CompileSpec rebuilds a workflow from a stored Spec (a deploy generation
// pins one) against the project: the same checks and the same result as
// Load gives for that definition, including its Hash. ${VAR} references in
// the Spec resolve through the project's LookupEnv now, under the rules of
// the definition's origin (envrefs.go). Positions in diagnostics name the
// workflow's spec, as a Spec has no lines.
func CompileSpec(p *Project, spec []byte, origin Origin) (*Workflow, error) {
	if p == nil {
		return nil, fmt.Errorf("compile spec: no project")
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("compile spec: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("compile spec: unexpected data after the spec")
	}
	file := "spec"
	if m, ok := raw.(map[string]any); ok {
		if name, ok := m["name"].(string); ok {
			file = "spec of " + name
		}
	}
	n, err := nodeFromJSON(raw, Position{File: file}, 0)
	if err != nil {
		return nil, fmt.Errorf("compile spec: %w", err)
	}
	return compileOne(p, n, origin)
}

// ParseWorkflow parses one workflow definition (YAML or JSON, such as the
// body of PUT /v1/workflows/{name}) and checks it against the project as a
// definition of OriginAPI: its ${VAR} references read only the env:
// allowlist (envrefs.go).
// Invalid definitions return *Diagnostics-compatible Diagnostics naming
// file; warnings of a valid one are in Workflow.Warnings.
func ParseWorkflow(p *Project, file string, src []byte) (*Workflow, error) {
	if p == nil {
		return nil, fmt.Errorf("parse workflow: no project")
	}
	docs, ds := parseYAML(file, src)
	if len(ds) > 0 {
		return nil, ds
	}
	if len(docs) != 1 {
		return nil, Diagnostics{{Pos: Position{File: file, Line: 1, Col: 1}, Message: fmt.Sprintf("want exactly one workflow document, found %d", len(docs))}}
	}
	return compileOne(p, docs[0], OriginAPI)
}

func compileOne(p *Project, n *node, origin Origin) (*Workflow, error) {
	l := definitionLoader(p, n, origin)
	w := l.workflow(n)
	sortDiagnostics(l.all)
	if l.all.HasErrors() || w == nil {
		if len(l.all) == 0 {
			return nil, Diagnostics{{Pos: n.pos, Message: "invalid workflow"}}
		}
		return nil, l.all
	}
	w.Warnings = l.all
	return w, nil
}

// canonicalJSON encodes a definition with sorted keys and no HTML escaping.
func canonicalJSON(n *node) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n.canonical()); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
