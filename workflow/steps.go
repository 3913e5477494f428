package workflow

import (
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/rflow-dev/rflow/redact"
)

var stepKinds = []string{StepHTTPCall, StepNotify, StepSend, StepWaitFor, StepForeach, StepDelay, StepGoto, StepFail, StepNoop}

// StepKinds lists every step kind the parser accepts.
func StepKinds() []string { return slices.Clone(stepKinds) }

var stepKeys = append([]string{"id", "if", "retry", "description", "steps", "concurrency"}, stepKinds...)

// steps compiles one list of steps. section names it in messages
// ("steps", "finally", "on_reorg", or the foreach step's id).
func (l *loader) steps(ctx *wfCtx, n *node, section string, sc *scope, parent *stepList) []*Step {
	items := l.list(n, section, false)
	if items == nil {
		return nil
	}
	list := &stepList{parent: parent}
	for _, it := range items {
		if idn := it.get("id"); idn != nil && idn.kind == nodeScalar {
			if id, ok := idn.val.(string); ok {
				list.ids = append(list.ids, id)
			}
		}
	}
	var out []*Step
	for _, it := range items {
		if s := l.step(ctx, it, sc, list); s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (l *loader) step(ctx *wfCtx, n *node, sc *scope, list *stepList) *Step {
	m := l.fields(n, "step", stepKeys...)
	if m == nil {
		return nil
	}
	s := &Step{Pos: n.pos}
	if idn := l.required(m, n, "id", "step"); idn != nil {
		s.ID = l.str(idn, "step id")
		if s.ID != "" && !idPattern.MatchString(s.ID) {
			l.errorf(idn.pos, "step id %q must start with a letter or _ and hold only letters, digits and _ (it is used as steps.%s in expressions)", s.ID, s.ID)
		}
	}
	var kinds []string
	for _, e := range n.entries {
		if contains(stepKinds, e.key) {
			kinds = append(kinds, e.key)
		}
	}
	if len(kinds) != 1 {
		if len(kinds) == 0 {
			l.errorf(n.pos, "step %s needs exactly one action: %s", s.ID, strings.Join(stepKinds, ", "))
		} else {
			l.errorf(n.pos, "step %s has %d actions (%s); split it into steps", s.ID, len(kinds), strings.Join(kinds, ", "))
		}
		return s
	}
	s.Kind = kinds[0]
	if cn := m["if"]; !cn.isNull() {
		s.If = l.boolExpr(cn, sc, "if")
	}
	if s.Kind != StepForeach {
		for _, k := range []string{"steps", "concurrency"} {
			if m[k] != nil {
				l.errorf(keyPos(n, k), "step %s: %s is only valid on a foreach step", s.ID, k)
			}
		}
	}
	body := m[s.Kind]
	switch s.Kind {
	case StepHTTPCall:
		s.HTTPCall = l.httpCall(s, body, sc)
	case StepNotify:
		s.Notify = l.notify(s, body, sc)
	case StepSend:
		s.Send = l.send(ctx, s, body, sc)
	case StepWaitFor:
		s.WaitFor = l.waitFor(ctx, s, body, sc, list)
	case StepForeach:
		s.Foreach = l.foreach(ctx, s, n, m, sc, list)
	case StepDelay:
		s.Delay = l.delay(s, body, sc)
	case StepGoto:
		s.Goto = l.gotoTarget(body, list, "goto")
	case StepFail:
		s.Fail = l.value(body, sc, "fail")
		if s.Fail == nil || body.isNull() {
			s.Fail = &Value{kind: valueLiteral, pos: n.pos, lit: "failed at step " + s.ID}
		}
	case StepNoop:
	}
	if r := m["retry"]; !r.isNull() {
		if s.Retry != nil {
			l.errorf(r.pos, "step %s: retry is set twice (on the step and in %s)", s.ID, s.Kind)
		} else {
			s.Retry = l.retry(r)
		}
	}
	return s
}

func (l *loader) gotoTarget(n *node, list *stepList, what string) string {
	id := l.str(n, what)
	if id == "" {
		if n != nil && n.isNull() {
			l.errorf(n.pos, "%s needs a step id", what)
		}
		return ""
	}
	if !list.has(id) {
		l.errorf(n.pos, "%s: no step %q in this step list or an enclosing one%s", what, id, suggest(id, list.reachable()))
		return ""
	}
	return id
}

var httpMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

func (l *loader) httpCall(s *Step, n *node, sc *scope) *HTTPCall {
	m := l.fields(n, "http_call", "method", "url", "headers", "body", "timeout", "expect_status", "hmac_secret", "retry")
	if m == nil {
		return nil
	}
	h := &HTTPCall{Method: "GET", Timeout: DefaultHTTPTimeout}
	if b := m["body"]; b != nil {
		h.Body = l.value(b, sc, "body")
		h.Method = "POST"
	}
	if mn := m["method"]; !mn.isNull() {
		if v, ok := l.scalar(mn, "method"); ok {
			v = strings.ToUpper(v)
			if !contains(httpMethods, v) {
				l.errorf(mn.pos, "method must be one of %s, not %q", strings.Join(httpMethods, ", "), v)
			}
			h.Method = v
		}
	}
	if u := l.required(m, n, "url", "http_call"); u != nil {
		h.URL = l.urlValue(u, sc, "url")
	}
	if hn := m["headers"]; !hn.isNull() {
		if hn.kind != nodeMap {
			l.errorf(hn.pos, "headers must be a mapping of header names to values")
		} else {
			h.Headers = map[string]*Value{}
			for _, e := range hn.entries {
				h.Headers[e.key] = l.value(e.value, sc, "header "+e.key)
			}
		}
	}
	if t := m["timeout"]; !t.isNull() {
		if d, ok := l.duration(t, "timeout"); ok {
			h.Timeout = d
		}
	}
	for _, sn := range l.list(m["expect_status"], "expect_status", true) {
		if v, ok := l.integer(sn, "expect_status", 100, 599); ok {
			h.ExpectStatus = append(h.ExpectStatus, int(v))
		}
	}
	if hs := m["hmac_secret"]; !hs.isNull() {
		h.HMACSecret = l.secretScalar(hs, "step "+s.ID+": hmac_secret")
	}
	if r := m["retry"]; !r.isNull() {
		s.Retry = l.retry(r)
	}
	return h
}

// urlValue compiles a URL; a literal one must be http(s).
func (l *loader) urlValue(n *node, sc *scope, what string) *Value {
	v := l.value(n, sc, what)
	if v == nil {
		return nil
	}
	markURL(v)
	if lit, ok := v.Literal(); ok {
		s, isStr := lit.(string)
		u, err := url.Parse(s)
		if !isStr || err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			l.errorf(n.pos, "%s %q is not an http(s) URL", what, redact.URL(s))
		}
	}
	return v
}

func (l *loader) notify(s *Step, n *node, sc *scope) *Notify {
	formats := []string{NotifyWebhook, NotifySlack, NotifyDiscord}
	m := l.fields(n, "notify", append(formats, "text", "body")...)
	if m == nil {
		return nil
	}
	no := &Notify{}
	var found []string
	for _, f := range formats {
		if m[f] != nil {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		l.errorf(n.pos, "notify needs exactly one destination: webhook, slack or discord (a URL)")
	} else {
		no.Format = found[0]
		no.URL = l.urlValue(m[found[0]], sc, no.Format)
	}
	if t := m["text"]; t != nil {
		no.Text = l.value(t, sc, "text")
	}
	if b := m["body"]; b != nil {
		no.Body = l.value(b, sc, "body")
	}
	if no.Text == nil && no.Body == nil {
		l.errorf(n.pos, "notify in step %s needs text or body", s.ID)
	}
	return no
}

func (l *loader) send(ctx *wfCtx, s *Step, n *node, sc *scope) *Send {
	m := l.fields(n, "send", "wallet", "network", "contract", "to", "value", "data", "function", "args", "confirmations", "budget", "approval")
	if m == nil {
		return nil
	}
	sd := &Send{}
	if wn := l.required(m, n, "wallet", "send"); wn != nil {
		name := l.str(wn, "wallet")
		if l.p.Wallet(name) == nil && name != "" {
			l.errorf(wn.pos, "unknown wallet %s%s", name, suggest(name, l.walletNames()))
		} else {
			sd.Wallet = name
		}
	}
	var c *Contract
	if cn := m["contract"]; !cn.isNull() {
		name := l.str(cn, "contract")
		if c = l.p.Contract(name); c == nil && name != "" {
			l.errorf(cn.pos, "unknown contract %s%s", name, suggest(name, l.contractNames()))
		} else if c != nil {
			sd.Contract = c.Name
			sd.ABI = c.ABI
		}
	}
	if nw := m["network"]; !nw.isNull() {
		sd.Network = l.networkRef(nw, "network")
		if c != nil && sd.Network != "" && c.Network != sd.Network {
			l.errorf(nw.pos, "send: contract %s is on network %s, not %s", c.Name, c.Network, sd.Network)
		}
	} else if c != nil {
		sd.Network = c.Network
	} else if sd.Network = l.defaultNetwork(); sd.Network == "" {
		l.errorf(n.pos, "send: %s", needNetwork(len(l.p.Networks)))
	}
	if to := m["to"]; !to.isNull() {
		if c != nil {
			l.errorf(to.pos, "send: set either to or contract, not both")
		}
		sd.To = l.value(to, sc, "to")
		l.checkStatic(sd.To, "to", addrT)
	} else if c == nil {
		l.errorf(n.pos, "send in step %s needs to: (an address) or contract:", s.ID)
	}
	if v := m["value"]; !v.isNull() {
		sd.Value = l.value(v, sc, "value")
		l.checkStatic(sd.Value, "value", intT)
	}
	fn, data := m["function"], m["data"]
	if !fn.isNull() && !data.isNull() {
		l.errorf(data.pos, "send: set either data or function, not both")
	}
	if !data.isNull() {
		sd.Data = l.value(data, sc, "data")
		l.checkStatic(sd.Data, "data", hashT)
	}
	if !fn.isNull() {
		if c == nil {
			l.errorf(fn.pos, "send: function needs contract: (whose ABI defines it)")
		} else if sd.ABIMethod = l.contractMethod(c, fn); sd.ABIMethod != nil {
			sd.Function = sd.ABIMethod.Name
		}
		sd.Args = l.callArgs(m["args"], keyPos(n, "args"), sd.ABIMethod, sc, "send")
	} else if m["args"] != nil {
		l.errorf(keyPos(n, "args"), "send: args need function:")
	}
	if !l.confirmationsTag(m["confirmations"], "send", "a send counts blocks; to act once its effect is TAG, wait_for its event with confirmations: TAG") {
		sd.Confirmations = l.confirmations(m["confirmations"], "send")
	}
	if b := m["budget"]; !b.isNull() {
		name := l.str(b, "budget")
		var names []string
		for _, br := range ctx.w.Budgets {
			names = append(names, br.Name)
		}
		if !contains(names, name) && name != "" {
			l.errorf(b.pos, "unknown budget %s; declare it under the workflow's budgets:%s", name, suggest(name, names))
		}
		for _, br := range ctx.w.Budgets {
			// An ERC-20 budget counts the amount argument of a transfer;
			// any other call would move tokens it cannot see.
			if br.Name == name && br.Asset != "native" && (sd.Contract != br.Asset ||
				(sd.Function != "transfer" && sd.Function != "transferFrom")) {
				l.errorf(b.pos, "budget %s caps %s transfers: a send under it must call %s.transfer or %s.transferFrom (contract: %s, function: transfer)",
					name, br.Asset, br.Asset, br.Asset, br.Asset)
			}
		}
		sd.Budget = name
	}
	if a := m["approval"]; !a.isNull() {
		sd.Approval = l.approval(a, sc)
	}
	return sd
}

// checkStatic checks a value's static type against what a field needs.
func (l *loader) checkStatic(v *Value, what string, want *typ) {
	if v == nil {
		return
	}
	if lit, ok := v.Literal(); ok {
		switch want.kind {
		case tAddress:
			if s, isStr := lit.(string); !isStr {
				l.errorf(v.pos, "%s must be an address, not %s", what, typeName(lit))
			} else if _, err := parseAddress(s); err != nil {
				l.errorf(v.pos, "%s: %v", what, err)
			}
		case tInt:
			if i, err := ToBigInt(lit); err != nil {
				l.errorf(v.pos, "%s must be an integer amount in wei (or \"1.5 ether\"), not %v", what, lit)
			} else if i.Sign() < 0 {
				l.errorf(v.pos, "%s must not be negative", what)
			}
		case tBytes:
			if s, isStr := lit.(string); !isStr {
				l.errorf(v.pos, "%s must be 0x-hex bytes", what)
			} else if _, err := decodeHex(s); err != nil {
				l.errorf(v.pos, "%s: %v", what, err)
			}
		}
		return
	}
	st := v.staticType()
	ok := st.kind == tAny || st.kind == tNil || st.kind == want.kind ||
		(want.kind == tAddress && st.kind == tString) ||
		(want.kind == tInt && st.kind == tString) ||
		(want.kind == tBytes && st.kind == tString)
	if !ok {
		l.errorf(v.pos, "%s must be %s, not %s", what, want.name, st.name)
	}
}

func (l *loader) approval(n *node, sc *scope) *Approval {
	m := l.fields(n, "approval", "required", "timeout", "on_timeout", "notify")
	if m == nil {
		return nil
	}
	a := &Approval{Timeout: DefaultApprovalTimeout, OnTimeout: "reject"}
	if r := m["required"]; !r.isNull() {
		a.Required = l.boolExpr(r, sc, "required")
	}
	if t := m["timeout"]; !t.isNull() {
		if d, ok := l.duration(t, "timeout"); ok {
			a.Timeout = d
		}
	}
	if o := m["on_timeout"]; !o.isNull() {
		if v, ok := l.oneOf(o, "on_timeout", "reject", "proceed"); ok {
			a.OnTimeout = v
			if v == "proceed" {
				l.warnf(o.pos, "approval on_timeout: proceed broadcasts the transaction when nobody answers in time")
			}
		}
	}
	if nn := m["notify"]; !nn.isNull() {
		name := l.str(nn, "notify")
		if l.p.Notifier(name) == nil && name != "" {
			hint := suggest(name, l.p.notifierNames())
			if len(l.p.Notifiers) == 0 {
				hint = " (declare it under the project's notifiers:)"
			}
			l.errorf(nn.pos, "approval notify: unknown notifier %q%s", name, hint)
		} else {
			a.Notify = name
		}
	}
	return a
}

func (l *loader) waitFor(ctx *wfCtx, s *Step, n *node, sc *scope, list *stepList) *WaitFor {
	m := l.fields(n, "wait_for", "event", "confirmations", "timeout", "on_timeout")
	if m == nil {
		return nil
	}
	wf := &WaitFor{}
	if en := l.required(m, n, "event", "wait_for"); en != nil {
		em := l.fields(en, "wait_for event", "contract", "event", "where")
		if em != nil {
			we := &WaitEvent{}
			c, ev := l.contractEvent(l.required(em, en, "contract", "wait_for event"), l.required(em, en, "event", "wait_for event"), "wait_for")
			evT := anyT
			if c != nil {
				we.Contract = c.Name
			}
			if ev != nil {
				we.Event, we.ABIEvent = ev.Name, ev
				evT = eventType(ev, true)
			}
			if w := em["where"]; !w.isNull() {
				we.Where = l.boolExpr(w, waitScope(sc, evT), "where")
				we.Keys = waitKeys(we.Where)
			}
			wf.Event = we
		}
	}
	wf.Confirmations, wf.Finality = l.waitConfirmations(m["confirmations"])
	if wf.Finality != "" && wf.Event != nil && wf.Event.Contract != "" {
		if c := l.p.Contract(wf.Event.Contract); c != nil {
			l.checkTag(m["confirmations"].pos, c.Network, "wait_for confirmations", wf.Finality)
		}
	}
	if t := m["timeout"]; !t.isNull() {
		if d, ok := l.duration(t, "timeout"); ok {
			wf.Timeout = d
		}
	}
	wf.OnTimeoutFail = true
	if o := m["on_timeout"]; !o.isNull() {
		if wf.Timeout == 0 {
			l.errorf(o.pos, "wait_for in step %s: on_timeout needs a timeout", s.ID)
		}
		if o.kind == nodeMap {
			om := l.fields(o, "on_timeout", "goto", "fail")
			switch {
			case om["goto"] != nil && om["fail"] != nil:
				l.errorf(o.pos, "on_timeout: set either goto or fail")
			case om["goto"] != nil:
				wf.OnTimeoutGoto = l.gotoTarget(om["goto"], list, "on_timeout goto")
				wf.OnTimeoutFail = false
			case om["fail"] != nil:
				if b, ok := l.boolean(om["fail"], "on_timeout fail"); ok {
					wf.OnTimeoutFail = b
				}
			}
		} else if _, ok := l.oneOf(o, "on_timeout", "fail"); !ok {
			return wf
		}
	}
	return wf
}

func (l *loader) foreach(ctx *wfCtx, s *Step, n *node, m map[string]*node, sc *scope, list *stepList) *Foreach {
	fe := &Foreach{Concurrency: 1}
	fe.Items = l.expr(m[StepForeach], sc, "foreach")
	itemT := anyT
	if fe.Items != nil {
		switch fe.Items.typ.kind {
		case tList:
			itemT = fe.Items.typ.elem
		case tAny:
		default:
			l.errorf(fe.Items.pos, "foreach needs a list; ${{ %s }} is %s", fe.Items.src, fe.Items.typ.name)
		}
	}
	if c := m["concurrency"]; !c.isNull() {
		if v, ok := l.integer(c, "concurrency", 1, 1000); ok {
			fe.Concurrency = int(v)
		}
	}
	if m["steps"].isNull() {
		l.errorf(n.pos, "foreach step %s needs steps: to run per item", s.ID)
		return fe
	}
	inner := sc.with("item", itemT).with("index", intT)
	fe.Steps = l.steps(ctx, m["steps"], s.ID, inner, list)
	return fe
}

func (l *loader) delay(s *Step, n *node, sc *scope) *Delay {
	d := &Delay{}
	if n != nil && n.kind == nodeMap {
		m := l.fields(n, "delay", "duration", "until")
		switch {
		case m["duration"] != nil && m["until"] != nil:
			l.errorf(n.pos, "delay: set either duration or until")
		case m["until"] != nil:
			d.Until = l.expr(m["until"], sc, "until")
			if d.Until != nil && d.Until.typ.kind != tAny && d.Until.typ.kind != tString {
				l.errorf(d.Until.pos, "until must give a time (an RFC 3339 string or date(...)), not %s", d.Until.typ.name)
			}
		case m["duration"] != nil:
			d.Duration, _ = l.duration(m["duration"], "delay")
		default:
			l.errorf(n.pos, "delay needs a duration or until")
		}
		return d
	}
	if n.isNull() {
		l.errorf(s.Pos, "delay in step %s needs a duration (e.g. 10m)", s.ID)
		return d
	}
	d.Duration, _ = l.duration(n, "delay")
	return d
}

func (l *loader) retry(n *node) *Retry {
	m := l.fields(n, "retry", "max_attempts", "backoff", "delay", "max_delay", "jitter", "on_status", "on_transport_error")
	if m == nil {
		return nil
	}
	r := &Retry{MaxAttempts: 3, Backoff: BackoffExponential, Delay: DefaultRetryDelay, MaxDelay: DefaultRetryMaxDelay, OnTransportError: true}
	if v := m["max_attempts"]; !v.isNull() {
		if i, ok := l.integer(v, "max_attempts", 1, 1000); ok {
			r.MaxAttempts = int(i)
		}
	}
	if v := m["backoff"]; !v.isNull() {
		if s, ok := l.oneOf(v, "backoff", BackoffFixed, BackoffExponential); ok {
			r.Backoff = s
		}
	}
	if v := m["delay"]; !v.isNull() {
		if d, ok := l.duration(v, "retry delay"); ok {
			r.Delay = d
		}
	}
	if v := m["max_delay"]; !v.isNull() {
		if d, ok := l.duration(v, "max_delay"); ok {
			r.MaxDelay = d
		}
	}
	if r.MaxDelay < r.Delay {
		l.errorf(n.pos, "retry: max_delay %s is shorter than delay %s", r.MaxDelay, r.Delay)
	}
	if v := m["jitter"]; !v.isNull() {
		r.Jitter, _ = l.boolean(v, "jitter")
	}
	if v := m["on_status"]; !v.isNull() {
		r.OnStatus = []int{}
		for _, sn := range l.list(v, "on_status", true) {
			if i, ok := l.integer(sn, "on_status", 100, 599); ok {
				r.OnStatus = append(r.OnStatus, int(i))
			}
		}
	}
	if v := m["on_transport_error"]; !v.isNull() {
		r.OnTransportError, _ = l.boolean(v, "on_transport_error")
	}
	return r
}

// guards reads throttle, rate_limit, budgets and circuit_breaker.
func (l *loader) guards(w *Workflow, m map[string]*node) {
	if n := m["throttle"]; !n.isNull() {
		f := l.fields(n, "throttle", "max", "per")
		if f != nil {
			t := &Throttle{}
			if v := l.required(f, n, "max", "throttle"); v != nil {
				if i, ok := l.integer(v, "throttle max", 1, math.MaxInt32); ok {
					t.Max = int(i)
				}
			}
			if v := l.required(f, n, "per", "throttle"); v != nil {
				t.Per, _ = l.duration(v, "throttle per")
			}
			w.Throttle = t
		}
	}
	if n := m["rate_limit"]; !n.isNull() {
		f := l.fields(n, "rate_limit", "max", "per", "durable")
		if f != nil {
			r := &RateLimit{}
			if v := l.required(f, n, "max", "rate_limit"); v != nil {
				if i, ok := l.integer(v, "rate_limit max", 1, math.MaxInt32); ok {
					r.Max = int(i)
				}
			}
			if v := l.required(f, n, "per", "rate_limit"); v != nil {
				r.Per, _ = l.duration(v, "rate_limit per")
			}
			if v := f["durable"]; !v.isNull() {
				r.Durable, _ = l.boolean(v, "durable")
			}
			w.RateLimit = r
		}
	}
	for _, n := range l.list(m["budgets"], "budgets", false) {
		f := l.fields(n, "budget", "name", "asset", "cap", "window")
		if f == nil {
			continue
		}
		b := BudgetRef{Asset: "native"}
		if v := l.required(f, n, "name", "budget"); v != nil {
			b.Name = l.str(v, "budget name")
			for _, other := range w.Budgets {
				if other.Name == b.Name {
					l.errorf(v.pos, "duplicate budget name %q", b.Name)
				}
			}
		}
		if v := f["asset"]; !v.isNull() {
			b.Asset = l.str(v, "asset")
			if b.Asset != "native" && l.p.Contract(b.Asset) == nil {
				l.errorf(v.pos, "budget asset must be native or a contract name, not %q%s", b.Asset, suggest(b.Asset, append(l.contractNames(), "native")))
			}
		}
		if v := l.required(f, n, "cap", "budget "+b.Name); v != nil {
			if s, ok := l.scalar(v, "cap"); ok {
				amt, err := parseAmount(s)
				if err != nil || amt.Sign() <= 0 {
					l.errorf(v.pos, "budget cap %q must be a positive amount like \"5 ether\", \"20 gwei\" or an integer in base units", s)
				} else {
					b.Cap, b.CapText = amt, s
				}
			}
		}
		if v := l.required(f, n, "window", "budget "+b.Name); v != nil {
			b.Window, _ = l.duration(v, "budget window")
		}
		w.Budgets = append(w.Budgets, b)
	}
	if n := m["circuit_breaker"]; !n.isNull() {
		f := l.fields(n, "circuit_breaker", "failures", "window", "notify")
		if f != nil {
			cb := &CircuitBreaker{}
			if v := l.required(f, n, "failures", "circuit_breaker"); v != nil {
				if i, ok := l.integer(v, "failures", 1, math.MaxInt32); ok {
					cb.Failures = int(i)
				}
			}
			if v := l.required(f, n, "window", "circuit_breaker"); v != nil {
				cb.Window, _ = l.duration(v, "circuit_breaker window")
			}
			if v := f["notify"]; !v.isNull() {
				cb.Notify, cb.NotifyPos = l.str(v, "notify"), v.pos
			}
			w.CircuitBreaker = cb
		}
	}
}

// concurrency reads the workflow-level concurrency: { max, key }; key sees
// what steps see before any has run (the trigger, run, env).
func (l *loader) concurrency(ctx *wfCtx, w *Workflow, n *node) {
	if n.isNull() {
		return
	}
	f := l.fields(n, "concurrency", "max", "key")
	if f == nil {
		return
	}
	c := &Concurrency{}
	if v := l.required(f, n, "max", "concurrency"); v != nil {
		if i, ok := l.integer(v, "concurrency max", 1, math.MaxInt32); ok {
			c.Max = int(i)
		}
	}
	c.Key = l.expr(f["key"], ctx.base, "concurrency key")
	w.Concurrency = c
}

// sendWarnings warns about sends under an in-process rate limit.
func (l *loader) sendWarnings(w *Workflow) {
	if w.RateLimit == nil || w.RateLimit.Durable {
		return
	}
	walkSteps(w.allLists(), func(s *Step) {
		if s.Kind == StepSend {
			l.warnf(s.Pos, "step %s sends a transaction under a rate_limit that is not durable: a restart resets the window (set rate_limit.durable: true)", s.ID)
		}
	})
}
