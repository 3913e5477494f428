package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/robfig/cron/v3"

	"github.com/rflow-dev/rflow/trigger"
)

var workflowKeys = []string{"name", "description", "trigger", "steps", "finally", "on_reorg", "on_failure",
	"throttle", "rate_limit", "concurrency", "budgets", "circuit_breaker"}

// wfCtx is what the checks of one workflow share.
type wfCtx struct {
	w       *Workflow
	base    *scope // the scope of steps
	eventT  *typ   // the trigger event's type (event triggers)
	resultT *typ   // the read result's type (read triggers)
	envT    *typ   // the declared environment (env)
	ids     map[string]Position
}

// stepList is one list of steps (steps, finally, on_reorg or a foreach
// body); goto may target its ids or those of enclosing lists.
type stepList struct {
	ids    []string
	parent *stepList
}

func (s *stepList) has(id string) bool {
	for ; s != nil; s = s.parent {
		if contains(s.ids, id) {
			return true
		}
	}
	return false
}

func (s *stepList) reachable() []string {
	var out []string
	for ; s != nil; s = s.parent {
		out = append(out, s.ids...)
	}
	return out
}

// workflow checks and compiles one workflow definition.
func (l *loader) workflow(n *node) *Workflow {
	l.inDefinition = true
	defer func() { l.inDefinition = false }()
	m := l.fields(n, "workflow", workflowKeys...)
	if m == nil {
		return nil
	}
	w := &Workflow{Pos: n.pos, OnFailure: DefaultOnFailure}
	if nn := l.required(m, n, "name", "workflow"); nn != nil {
		w.Name = l.str(nn, "workflow name")
		if w.Name != "" && !namePattern.MatchString(w.Name) {
			l.errorf(nn.pos, "workflow name %q must start with a letter and hold only letters, digits, - and _ (at most 100)", w.Name)
		}
		if strings.Contains(w.Name, "__") {
			l.errorf(nn.pos, "workflow name %q must not contain \"__\" (reserved for replay and test namespaces)", w.Name)
		}
	}
	spec, err := canonicalJSON(n)
	if err != nil {
		l.errorf(n.pos, "workflow %s: cannot build its canonical spec: %v", w.Name, err)
	}
	w.Spec = spec
	sum := sha256.Sum256(spec)
	w.Hash = hex.EncodeToString(sum[:])

	ctx := &wfCtx{w: w, ids: map[string]Position{}, envT: l.p.envType()}
	l.collectIDs(ctx, m["steps"], m["finally"], m["on_reorg"])

	trig := m["trigger"]
	if trig.isNull() {
		l.errorf(n.pos, "workflow %s: missing trigger (one of %s)", w.Name, strings.Join(triggerKinds, ", "))
	} else {
		l.trigger(ctx, trig)
	}
	ctx.base = stepScope(ctx)

	if of := m["on_failure"]; !of.isNull() {
		if s, ok := l.oneOf(of, "on_failure", "dead_letter"); ok {
			w.OnFailure = s
		}
	}
	l.guards(w, m)
	l.concurrency(ctx, w, m["concurrency"])

	if m["steps"].isNull() {
		l.errorf(n.pos, "workflow %s: needs at least one step under steps:", w.Name)
	}
	w.Steps = l.steps(ctx, m["steps"], "steps", ctx.base, nil)
	w.Finally = l.steps(ctx, m["finally"], "finally", ctx.base, nil)
	if or := m["on_reorg"]; !or.isNull() && w.Trigger.Kind != "" && w.Trigger.Kind != trigger.Event {
		l.errorf(keyPos(n, "on_reorg"), "workflow %s: on_reorg needs an event trigger (a %s trigger has no log to orphan)", w.Name, w.Trigger.Kind)
	}
	w.OnReorg = l.steps(ctx, m["on_reorg"], "on_reorg", reorgScope(ctx.base), nil)
	// A response has its own journal, and waits and approval gates are
	// rows of a run: refuse them here rather than fail at run time.
	walkSteps([][]*Step{w.OnReorg}, func(s *Step) {
		switch {
		case s.WaitFor != nil:
			l.errorf(s.Pos, "step %s: wait_for is not available in on_reorg (a reorg response cannot park on an event); use it in steps:", s.ID)
		case s.Send != nil && s.Send.Approval != nil:
			l.errorf(s.Pos, "step %s: approval is not available in on_reorg (a reorg response cannot park on a gate); remove approval:", s.ID)
		}
	})
	l.sendWarnings(w)
	l.budgetUnits(w)
	return w
}

// collectIDs records every step id of the workflow (all lists, foreach
// bodies included), reporting duplicates: ids key the step journal, so they
// are unique across the whole workflow.
func (l *loader) collectIDs(ctx *wfCtx, lists ...*node) {
	for _, list := range lists {
		if list == nil || list.kind != nodeSeq {
			continue
		}
		for _, s := range list.items {
			idn := s.get("id")
			if idn != nil && idn.kind == nodeScalar {
				if id, ok := idn.val.(string); ok && id != "" {
					if first, dup := ctx.ids[id]; dup {
						l.errorf(idn.pos, "duplicate step id %q (first at %s)", id, first)
					} else {
						ctx.ids[id] = idn.pos
					}
				}
			}
			if s.get(StepForeach) != nil {
				l.collectIDs(ctx, s.get("steps"))
			}
		}
	}
}

// triggerKinds are the keys of a trigger block, one per trigger kind.
var triggerKinds = func() []string {
	var out []string
	for _, k := range trigger.Kinds() {
		out = append(out, string(k))
	}
	return out
}()

// trigger compiles the workflow's trigger (exactly one kind).
func (l *loader) trigger(ctx *wfCtx, n *node) {
	m := l.fields(n, "trigger", triggerKinds...)
	if m == nil {
		return
	}
	var kinds []string
	for _, e := range n.entries {
		if contains(triggerKinds, e.key) {
			kinds = append(kinds, e.key)
		}
	}
	if len(kinds) != 1 {
		if len(kinds) == 0 {
			l.errorf(n.pos, "trigger needs exactly one of %s", strings.Join(triggerKinds, ", "))
		} else {
			l.errorf(n.pos, "a workflow has exactly one trigger; found %s", strings.Join(kinds, " and "))
		}
		return
	}
	t := &ctx.w.Trigger
	t.Kind, t.Pos = trigger.Kind(kinds[0]), keyPos(n, kinds[0])
	body := m[kinds[0]]
	switch t.Kind {
	case trigger.Event:
		t.Event = l.eventTrigger(ctx, body)
	case trigger.Cron:
		t.Cron = l.cronTrigger(body)
	case trigger.Block:
		t.Block = l.blockTrigger(body)
	case trigger.Read:
		t.Read = l.readTrigger(ctx, body)
	case trigger.Webhook:
		t.Webhook = l.webhookTrigger(ctx, body)
	case trigger.Manual:
		if !body.isNull() && body.kind == nodeMap {
			l.fields(body, "manual trigger")
		}
		t.Manual = &ManualTrigger{}
	}
}

// eventType describes an event's arguments plus the log fields rflow adds;
// txLog adds tx_log_index, which a trigger's where: does not see (it is
// read from receipts for the logs where: keeps).
func eventType(ev *abi.Event, txLog bool) *typ {
	fields := map[string]*typ{
		"block": intT, "block_hash": hashT, "tx_hash": hashT, "log_index": intT, "address": addrT,
	}
	if txLog {
		fields["tx_log_index"] = intT
	}
	for _, in := range ev.Inputs {
		if in.Name != "" {
			fields[in.Name] = abiTyp(in.Type)
		}
	}
	return objectT("event "+ev.Name, fields)
}

// contractEvent resolves contract and event names.
func (l *loader) contractEvent(cn, en *node, what string) (*Contract, *abi.Event) {
	var c *Contract
	if cn != nil {
		name := l.str(cn, what+" contract")
		if name != "" {
			if c = l.p.Contract(name); c == nil {
				l.errorf(cn.pos, "unknown contract %s%s", name, suggest(name, l.contractNames()))
			}
		}
	}
	if c == nil || c.ABI == nil || en == nil {
		return c, nil
	}
	name := l.str(en, what+" event")
	if ev, ok := c.ABI.Events[name]; ok {
		return c, &ev
	}
	var names []string
	for k := range c.ABI.Events {
		names = append(names, k)
	}
	sort.Strings(names)
	if name != "" {
		l.errorf(en.pos, "unknown event %s on %s%s (events: %s)", name, c.Name, suggest(name, names), joinNames(names))
	}
	return c, nil
}

func (l *loader) eventTrigger(ctx *wfCtx, n *node) *EventTrigger {
	m := l.fields(n, "event trigger", "contract", "event", "where", "confirmations", "run_on")
	if m == nil {
		return nil
	}
	et := &EventTrigger{RunOn: RunOnConfirmed}
	cn := l.required(m, n, "contract", "event trigger")
	en := l.required(m, n, "event", "event trigger")
	c, ev := l.contractEvent(cn, en, "event trigger")
	if c != nil {
		et.Contract = c.Name
	}
	if ev != nil {
		et.Event, et.ABIEvent = ev.Name, ev
		ctx.eventT = eventType(ev, true)
	} else {
		et.Event = l.str(en, "event")
		ctx.eventT = anyT
	}
	if !l.confirmationsTag(m["confirmations"], "event trigger", "for the node's TAG block use run_on: TAG") {
		et.Confirmations = l.confirmations(m["confirmations"], "event trigger")
	}
	network := ""
	if c != nil {
		network = c.Network
	}
	l.eventRunOn(m["run_on"], m["confirmations"], et, network)
	if wn := m["where"]; !wn.isNull() {
		sc := triggerScope(ctx)
		if ev != nil {
			sc.vars["event"] = eventType(ev, false)
		}
		et.Where = l.boolExpr(wn, sc, "where")
	}
	return et
}

// confirmations reads an optional depth, warning on 0.
func (l *loader) confirmations(n *node, what string) *int {
	if n.isNull() {
		return nil
	}
	v, ok := l.integer(n, "confirmations", 0, 10_000)
	if !ok {
		return nil
	}
	if v == 0 {
		l.warnf(n.pos, "%s: confirmations: 0 acts at head speed; a reorg can orphan what it acted on", what)
	}
	c := int(v)
	return &c
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func (l *loader) cronTrigger(n *node) *CronTrigger {
	ct := &CronTrigger{}
	sched := n
	if n != nil && n.kind == nodeMap {
		m := l.fields(n, "cron trigger", "schedule", "catch_up")
		sched = l.required(m, n, "schedule", "cron trigger")
		if cu := m["catch_up"]; !cu.isNull() {
			ct.CatchUp, _ = l.boolean(cu, "catch_up")
		}
	}
	if sched == nil {
		return ct
	}
	s, ok := l.scalar(sched, "schedule")
	if !ok {
		l.errorf(sched.pos, "cron schedule is required")
		return ct
	}
	parsed, err := parseCron(s)
	if err != nil {
		l.errorf(sched.pos, "invalid cron schedule %q: %v (use 5 fields, e.g. \"*/5 * * * *\", or @hourly/@daily/@every 10m)", s, err)
		return ct
	}
	ct.Schedule, ct.schedule = s, parsed
	return ct
}

func parseCron(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("%v", r)
		}
	}()
	if strings.HasPrefix(strings.TrimSpace(s), "TZ=") || strings.HasPrefix(strings.TrimSpace(s), "CRON_TZ=") {
		return nil, fmt.Errorf("time zones are not supported; schedules run in UTC")
	}
	return cronParser.Parse(s)
}

func (l *loader) blockTrigger(n *node) *BlockTrigger {
	m := l.fields(n, "block trigger", "network", "every", "run_on")
	if m == nil {
		return nil
	}
	bt := &BlockTrigger{Every: 1, RunOn: RunOnHead}
	if nn := m["network"]; !nn.isNull() {
		bt.Network = l.networkRef(nn, "network")
	} else if bt.Network = l.defaultNetwork(); bt.Network == "" {
		l.errorf(n.pos, "block trigger: %s", needNetwork(len(l.p.Networks)))
	}
	if e := m["every"]; !e.isNull() {
		if v, ok := l.integer(e, "every", 1, math.MaxInt32); ok {
			bt.Every = uint64(v)
		}
	}
	if r := m["run_on"]; !r.isNull() {
		if s, ok := l.oneOf(r, "block trigger run_on", RunOnHead, RunOnSafe, RunOnFinalized); ok {
			bt.RunOn = s
			if s != RunOnHead && bt.Network != "" {
				l.checkTag(r.pos, bt.Network, "block trigger run_on", s)
			}
		}
	}
	return bt
}

// methodResultType is the type of a view call's result: its only output, or
// for several an object by name that is also indexable by position
// (result.reserve0 and result[0], like ethers' Result). An unnamed output
// is arg<i> by name (trigger.ResultNames), as the read trigger decodes it.
func methodResultType(m *abi.Method) *typ {
	switch len(m.Outputs) {
	case 0:
		return nilT
	case 1:
		return abiTyp(m.Outputs[0].Type)
	}
	fields := map[string]*typ{}
	order := trigger.ResultNames(m.Outputs)
	for i, o := range m.Outputs {
		fields[order[i]] = abiTyp(o.Type)
	}
	t := objectT(m.Name+" result", fields)
	t.order = order
	return t
}

// contractMethod resolves a contract and one of its functions.
func (l *loader) contractMethod(c *Contract, fn *node) *abi.Method {
	if c == nil || c.ABI == nil || fn == nil {
		return nil
	}
	name := l.str(fn, "function")
	if m, ok := c.ABI.Methods[name]; ok {
		return &m
	}
	var names []string
	for k := range c.ABI.Methods {
		names = append(names, k)
	}
	sort.Strings(names)
	if name != "" {
		l.errorf(fn.pos, "unknown function %s on %s%s (functions: %s)", name, c.Name, suggest(name, names), joinNames(names))
	}
	return nil
}

func (l *loader) readTrigger(ctx *wfCtx, n *node) *ReadTrigger {
	m := l.fields(n, "read trigger", "contract", "function", "args", "every", "when")
	if m == nil {
		return nil
	}
	rt := &ReadTrigger{}
	var c *Contract
	if cn := l.required(m, n, "contract", "read trigger"); cn != nil {
		name := l.str(cn, "contract")
		if c = l.p.Contract(name); c == nil && name != "" {
			l.errorf(cn.pos, "unknown contract %s%s", name, suggest(name, l.contractNames()))
		} else if c != nil {
			rt.Contract = c.Name
		}
	}
	fn := l.required(m, n, "function", "read trigger")
	rt.ABIMethod = l.contractMethod(c, fn)
	resultT := anyT
	if rt.ABIMethod != nil {
		rt.Function = rt.ABIMethod.Name
		if !rt.ABIMethod.IsConstant() {
			l.errorf(fn.pos, "read trigger: %s.%s is not a view function", c.Name, rt.Function)
		}
		resultT = methodResultType(rt.ABIMethod)
	} else if fn != nil {
		rt.Function = l.str(fn, "function")
	}
	ctx.resultT = resultT
	sc := triggerScope(ctx)
	rt.Args = l.callArgs(m["args"], keyPos(n, "args"), rt.ABIMethod, envScope(ctx), "read trigger")
	if e := l.required(m, n, "every", "read trigger"); e != nil {
		if s, ok := l.scalar(e, "every"); ok {
			if f := strings.Fields(s); len(f) == 2 && (f[1] == "blocks" || f[1] == "block") {
				k, err := strconv.ParseUint(f[0], 10, 32)
				if err != nil || k == 0 {
					l.errorf(e.pos, "every: %q is not a block count like \"5 blocks\"", s)
				} else {
					rt.EveryBlocks = k
				}
			} else if d, ok := l.duration(e, "every"); ok {
				rt.Every = d
			}
		}
	}
	if wn := m["when"]; !wn.isNull() {
		rt.When = l.boolExpr(wn, sc, "when")
	}
	return rt
}

func (l *loader) webhookTrigger(ctx *wfCtx, n *node) *WebhookTrigger {
	m := l.fields(n, "webhook trigger", "secret", "idempotency_key", "ttl", "signed_headers", "legacy_signatures")
	if m == nil {
		return nil
	}
	wt := &WebhookTrigger{TTL: DefaultWebhookTTL}
	if s := m["secret"]; !s.isNull() {
		wt.Secret = l.secretScalar(s, "workflow "+ctx.w.Name+": webhook secret")
	}
	sc := triggerScope(ctx)
	if k := m["idempotency_key"]; !k.isNull() {
		wt.IdempotencyKey = l.expr(k, sc, "idempotency_key")
	} else {
		l.warnf(ctx.w.Trigger.Pos, "webhook trigger without idempotency_key: runs are at-least-once (a retried POST starts a new run)")
	}
	if t := m["ttl"]; !t.isNull() {
		if d, ok := l.duration(t, "ttl"); ok {
			wt.TTL = d
		}
	}
	l.webhookSigning(wt, m)
	return wt
}
