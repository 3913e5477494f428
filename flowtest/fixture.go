// Package flowtest runs workflow tests: fixture files beside a project
// (tests/*.test.yaml) that give a workflow occurrences (logs, cron ticks,
// webhook requests, manual inputs, read results), stub the HTTP responses
// its steps get, and state what must come out (which runs, which steps ran
// or were skipped, each request and send, outputs, final status). Tests
// run on the project's Postgres under namespaced workflow names
// (rehearsal.TestName) in an engine of their own (jobs.Rehearsal), so they
// never touch a live workflow's rows, and they delete every row they made.
package flowtest

import (
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"

	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// File is one parsed fixture file.
type File struct {
	Path  string
	Tests []*Test
}

// Test is one workflow test.
type Test struct {
	Name     string
	Pos      workflow.Position
	Workflow string
	WfPos    workflow.Position
	Given    []Occurrence
	HTTP     []Stub
	Expect   Expect
}

// Occurrence is one trigger occurrence a test feeds its workflow.
type Occurrence struct {
	Pos  workflow.Position
	Kind trigger.Kind
	// Key, when set, is the occurrence's trigger key (before the test's
	// prefix); two occurrences with one key are one run.
	Key string
	// Body is the kind's value: an event's args, a cron tick, a webhook's
	// body and headers, a manual input, a read result, a block number.
	Body *workflow.YAMLValue
}

// Stub is a canned HTTP response for the requests it matches.
type Stub struct {
	Pos     workflow.Position
	Method  string // empty: any
	URL     string // empty: any
	Status  int
	Headers map[string]string
	Body    any // plain data; a string is sent as is, anything else as JSON
}

// Expect is what a test checks. A nil part is not checked.
type Expect struct {
	// Runs are the runs the occurrences created, in order; nil when only
	// RunCount is given or nothing is said about runs.
	Runs     []Want
	RunCount *int
	RunsPos  workflow.Position
	// Requests are every HTTP request the runs made, in order.
	Requests []Want
	ReqPos   workflow.Position
	// Sends are every send the runs made, in order.
	Sends    []Want
	SendsPos workflow.Position
}

// Want is an expected value with its place in the fixture: a mapping
// checks only the keys it names; lists and scalars compare exactly.
type Want struct {
	Pos   workflow.Position
	Value any
	// At holds the positions of nested keys, by path ("body.amount"), for
	// diagnostics.
	At map[string]workflow.Position
}

// FixtureSuffix is how fixture files are named.
const FixtureSuffix = ".test.yaml"

// ParseFile reads and parses one fixture file.
func ParseFile(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Parse parses a fixture file's source. Every problem is a
// workflow.Diagnostic naming file:line:col; the error is
// workflow.Diagnostics.
func Parse(path string, src []byte) (*File, error) {
	docs, ds := workflow.ParseYAMLValues(path, src)
	if len(ds) > 0 {
		return nil, ds
	}
	p := &parser{file: path}
	f := &File{Path: path}
	if len(docs) != 1 {
		return nil, workflow.Diagnostics{{Pos: workflow.Position{File: path, Line: 1, Col: 1},
			Message: fmt.Sprintf("want one YAML document with tests:, found %d", len(docs))}}
	}
	root := docs[0]
	if !p.keys(root, "fixture file", "workflow", "tests") {
		return nil, p.ds
	}
	defWf := p.str(root.Get("workflow"), "workflow")
	tests := root.Get("tests")
	switch {
	case tests == nil:
		p.errorf(root.Pos, "missing tests: (a list of tests, each with name:, given: and expect:)")
	case !tests.IsList():
		p.errorf(tests.Pos, "tests: must be a list, not %s", tests.Describe())
	}
	seen := map[string]workflow.Position{}
	if tests != nil {
		for _, tv := range tests.Items {
			t := p.test(tv, defWf, root.Get("workflow"))
			if t == nil {
				continue
			}
			if at, dup := seen[t.Name]; dup {
				p.errorf(t.Pos, "duplicate test name %q (first at %s)", t.Name, at)
				continue
			}
			seen[t.Name] = t.Pos
			f.Tests = append(f.Tests, t)
		}
	}
	if len(p.ds) > 0 {
		return nil, p.ds
	}
	return f, nil
}

type parser struct {
	file string
	ds   workflow.Diagnostics
}

func (p *parser) errorf(pos workflow.Position, format string, args ...any) {
	p.ds = append(p.ds, workflow.Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...)})
}

// keys checks that v is a mapping holding only allowed keys.
func (p *parser) keys(v *workflow.YAMLValue, what string, allowed ...string) bool {
	if !v.IsMap() {
		p.errorf(v.Pos, "%s must be a mapping, not %s", what, v.Describe())
		return false
	}
	ok := true
	for _, f := range v.Fields {
		if !slices.Contains(allowed, f.Key) {
			p.errorf(f.KeyPos, "unknown key %q in %s (known: %s)", f.Key, what, strings.Join(allowed, ", "))
			ok = false
		}
	}
	return ok
}

// str reads a string scalar (nil: "").
func (p *parser) str(v *workflow.YAMLValue, what string) string {
	if v == nil || v.IsNull() {
		return ""
	}
	s, ok := v.Scalar.(string)
	if !ok || v.IsMap() || v.IsList() {
		p.errorf(v.Pos, "%s must be a string, not %s", what, v.Describe())
		return ""
	}
	return s
}

func (p *parser) strList(v *workflow.YAMLValue, what string) []string {
	if !v.IsList() {
		p.errorf(v.Pos, "%s must be a list of step ids, not %s", what, v.Describe())
		return nil
	}
	out := []string{}
	for _, it := range v.Items {
		out = append(out, p.str(it, what+" item"))
	}
	return out
}

func (p *parser) test(v *workflow.YAMLValue, defWf string, defWfV *workflow.YAMLValue) *Test {
	if !p.keys(v, "test", "name", "workflow", "given", "http", "expect") {
		return nil
	}
	t := &Test{Pos: v.Pos, Name: p.str(v.Get("name"), "name"), Workflow: defWf}
	if defWfV != nil {
		t.WfPos = defWfV.Pos
	}
	if t.Name == "" {
		p.errorf(v.Pos, "test needs a name:")
	}
	if w := v.Get("workflow"); w != nil {
		t.Workflow, t.WfPos = p.str(w, "workflow"), w.Pos
	}
	if t.Workflow == "" {
		p.errorf(v.Pos, "test %q: no workflow: (set it on the test or at the top of the file)", t.Name)
	}
	given := v.Get("given")
	switch {
	case given == nil:
		p.errorf(v.Pos, "test %q needs given: (the occurrences to feed the workflow)", t.Name)
	case given.IsMap():
		t.Given = append(t.Given, p.occurrence(given))
	case given.IsList():
		for _, o := range given.Items {
			t.Given = append(t.Given, p.occurrence(o))
		}
	default:
		p.errorf(given.Pos, "given: must be an occurrence or a list of them, not %s", given.Describe())
	}
	if h := v.Get("http"); h != nil {
		if !h.IsList() {
			p.errorf(h.Pos, "http: must be a list of stubbed responses, not %s", h.Describe())
		} else {
			for _, s := range h.Items {
				t.HTTP = append(t.HTTP, p.stub(s))
			}
		}
	}
	if e := v.Get("expect"); e == nil {
		p.errorf(v.Pos, "test %q needs expect: (what must come out)", t.Name)
	} else {
		t.Expect = p.expect(e)
	}
	return t
}

// occurrenceKinds are the keys an occurrence is written with.
var occurrenceKinds = []trigger.Kind{trigger.Event, trigger.Cron, trigger.Block, trigger.Read, trigger.Webhook, trigger.Manual}

func (p *parser) occurrence(v *workflow.YAMLValue) Occurrence {
	o := Occurrence{Pos: v.Pos}
	allowed := []string{"key"}
	for _, k := range occurrenceKinds {
		allowed = append(allowed, string(k))
	}
	if !p.keys(v, "occurrence", allowed...) {
		return o
	}
	o.Key = p.str(v.Get("key"), "key")
	for _, f := range v.Fields {
		if f.Key == "key" {
			continue
		}
		if o.Kind != "" {
			p.errorf(f.KeyPos, "one occurrence has one kind: %s and %s (write two list items)", o.Kind, f.Key)
			continue
		}
		o.Kind, o.Body, o.Pos = trigger.Kind(f.Key), f.Value, f.KeyPos
	}
	if o.Kind == "" {
		p.errorf(v.Pos, "occurrence needs one of event:, cron:, block:, read:, webhook:, manual:")
		return o
	}
	p.occurrenceBody(o)
	return o
}

// occurrenceBody checks the shape of each kind's value (its meaning, such
// as an event's args, is checked against the workflow when the test runs).
func (p *parser) occurrenceBody(o Occurrence) {
	b := o.Body
	switch o.Kind {
	case trigger.Event:
		if !b.IsMap() {
			p.errorf(b.Pos, "event: must be a mapping of the event's args (and optionally block, tx_hash, log_index, address), not %s", b.Describe())
		}
	case trigger.Cron:
		p.str(b, "cron: (the scheduled tick, RFC 3339)")
	case trigger.Block:
		if _, ok := integer(b); !ok {
			p.errorf(b.Pos, "block: must be a block number, not %s", b.Describe())
		}
	case trigger.Read:
		if p.keys(b, "read:", "result", "block") {
			if blk := b.Get("block"); blk != nil {
				if _, ok := integer(blk); !ok {
					p.errorf(blk.Pos, "block must be a block number, not %s", blk.Describe())
				}
			}
		}
	case trigger.Webhook:
		if p.keys(b, "webhook:", "body", "headers") {
			if h := b.Get("headers"); h != nil {
				p.headers(h)
			}
		}
	case trigger.Manual:
		p.keys(b, "manual:", "input")
	}
}

func (p *parser) headers(v *workflow.YAMLValue) map[string]string {
	if !v.IsMap() {
		p.errorf(v.Pos, "headers must be a mapping of names to values, not %s", v.Describe())
		return nil
	}
	out := map[string]string{}
	for _, f := range v.Fields {
		if f.Value.IsMap() || f.Value.IsList() {
			p.errorf(f.Value.Pos, "header %s must be a single value, not %s", f.Key, f.Value.Describe())
			continue
		}
		out[strings.ToLower(f.Key)] = fmt.Sprint(plainScalar(f.Value))
	}
	return out
}

func (p *parser) stub(v *workflow.YAMLValue) Stub {
	s := Stub{Pos: v.Pos, Status: 200}
	if !p.keys(v, "http stub", "method", "url", "status", "headers", "body") {
		return s
	}
	s.Method = strings.ToUpper(p.str(v.Get("method"), "method"))
	s.URL = p.str(v.Get("url"), "url")
	if st := v.Get("status"); st != nil {
		n, ok := integer(st)
		if !ok || n < 100 || n > 599 {
			p.errorf(st.Pos, "status must be an HTTP status code (100-599), not %s", st.Describe())
		}
		s.Status = int(n)
	}
	if h := v.Get("headers"); h != nil {
		s.Headers = p.headers(h)
	}
	if b := v.Get("body"); b != nil {
		s.Body = b.Plain()
	}
	return s
}

// runStatuses are the statuses a run expectation may name.
var runStatuses = []string{"completed", "failed", "cancelled", "throttled", "queued", "running",
	"waiting_delay", "waiting_tx", "waiting_event", "waiting_approval"}

func (p *parser) expect(v *workflow.YAMLValue) Expect {
	var e Expect
	if !p.keys(v, "expect", "runs", "status", "steps", "outputs", "error", "requests", "sends") {
		return e
	}
	runFields := []string{"status", "steps", "outputs", "error"}
	short := false
	for _, k := range runFields {
		short = short || v.Get(k) != nil
	}
	if r := v.Get("runs"); r != nil {
		e.RunsPos = r.Pos
		switch {
		case short:
			p.errorf(r.Pos, "expect: give runs: or the single run's %s, not both", strings.Join(runFields, "/"))
		case r.IsList():
			for _, it := range r.Items {
				e.Runs = append(e.Runs, p.run(it))
			}
		default:
			n, ok := integer(r)
			if !ok || n < 0 {
				p.errorf(r.Pos, "runs: must be a count or a list of runs, not %s", r.Describe())
			}
			c := int(n)
			e.RunCount = &c
		}
	} else if short {
		e.RunsPos = v.Pos
		e.Runs = []Want{p.runFields(v)}
	}
	if r := v.Get("requests"); r != nil {
		e.ReqPos = r.Pos
		e.Requests = p.list(r, "requests", "request", []string{"method", "url", "headers", "body"})
	}
	if s := v.Get("sends"); s != nil {
		e.SendsPos = s.Pos
		e.Sends = p.list(s, "sends", "send", []string{"wallet", "network", "chain_id", "to", "value", "function", "args", "data"})
	}
	return e
}

func (p *parser) list(v *workflow.YAMLValue, what, item string, keys []string) []Want {
	if !v.IsList() {
		p.errorf(v.Pos, "%s: must be a list, not %s", what, v.Describe())
		return nil
	}
	out := []Want{}
	for _, it := range v.Items {
		p.keys(it, item, keys...)
		if m := it.Get("method"); m != nil && what == "requests" {
			p.str(m, "method")
		}
		out = append(out, want(it))
	}
	return out
}

func (p *parser) run(v *workflow.YAMLValue) Want {
	if !p.keys(v, "run", "status", "steps", "outputs", "error") {
		return want(v)
	}
	return p.runFields(v)
}

// runFields checks a run expectation's fields (in a runs: item or the
// expect: shorthand, which may hold other keys).
func (p *parser) runFields(v *workflow.YAMLValue) Want {
	m := map[string]any{}
	at := map[string]workflow.Position{}
	if s := v.Get("status"); s != nil {
		st := p.str(s, "status")
		if st != "" && !slices.Contains(runStatuses, st) {
			p.errorf(s.Pos, "status %q is not a run status (%s)", st, strings.Join(runStatuses, ", "))
		}
		m["status"], at["status"] = st, s.Pos
	}
	if s := v.Get("error"); s != nil {
		m["error"], at["error"] = p.str(s, "error"), s.Pos
	}
	if s := v.Get("steps"); s != nil {
		steps := map[string]any{}
		if p.keys(s, "steps", "ran", "skipped", "failed") {
			for _, f := range s.Fields {
				ids := p.strList(f.Value, "steps."+f.Key)
				l := make([]any, len(ids))
				for i, id := range ids {
					l[i] = id
				}
				steps[f.Key], at["steps."+f.Key] = l, f.Value.Pos
			}
		}
		m["steps"], at["steps"] = steps, s.Pos
	}
	if o := v.Get("outputs"); o != nil {
		if !o.IsMap() {
			p.errorf(o.Pos, "outputs must be a mapping of step ids to their expected output, not %s", o.Describe())
		} else {
			m["outputs"], at["outputs"] = o.Plain(), o.Pos
			collectPositions(o, "outputs", at)
		}
	}
	return Want{Pos: v.Pos, Value: m, At: at}
}

// want makes an expectation of a whole value, with the positions of its
// nested keys.
func want(v *workflow.YAMLValue) Want {
	w := Want{Pos: v.Pos, Value: v.Plain(), At: map[string]workflow.Position{}}
	collectPositions(v, "", w.At)
	return w
}

func collectPositions(v *workflow.YAMLValue, path string, at map[string]workflow.Position) {
	for _, f := range v.Fields {
		k := join(path, f.Key)
		at[k] = f.Value.Pos
		collectPositions(f.Value, k, at)
	}
	for i, it := range v.Items {
		k := fmt.Sprintf("%s[%d]", path, i)
		at[k] = it.Pos
		collectPositions(it, k, at)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// integer reads an integer scalar.
func integer(v *workflow.YAMLValue) (int64, bool) {
	if v == nil || v.IsMap() || v.IsList() {
		return 0, false
	}
	switch n := v.Scalar.(type) {
	case int64:
		return n, true
	case *big.Int:
		if n.IsInt64() {
			return n.Int64(), true
		}
	}
	return 0, false
}

func plainScalar(v *workflow.YAMLValue) any {
	if v.Scalar == nil {
		return ""
	}
	return v.Plain()
}
