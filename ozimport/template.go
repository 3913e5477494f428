package ozimport

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

// templateVar matches a Monitor template variable: ${monitor.name},
// ${events.0.args.value}, and the older flat form ${event_0_value},
// ${transaction_hash}, ${monitor_name}.
var templateVar = regexp.MustCompile(`\$\{([A-Za-z0-9_.]+)\}`)

// templateContext is what one workflow's message templates can refer to:
// the monitor and the one event that started the run.
type templateContext struct {
	b       *builder
	monitor *Monitor
	ev      abi.Event
	sig     string // the condition's signature, as Monitor reports it
}

// chat is Monitor's Slack and Discord text: "*title*\n\nbody".
func (tc *templateContext) chat(msg Message, m *Monitor, t *Trigger) string {
	return "*" + tc.render(msg.Title, m, t, "message.title") + "*\n\n" + tc.render(msg.Body, m, t, "message.body")
}

// telegram is Monitor's Telegram text: "*title* \n\nbody", both escaped
// for MarkdownV2 after substitution.
func (tc *templateContext) telegram(msg Message, m *Monitor, t *Trigger) string {
	title := tc.substitute(msg.Title, m, t, "message.title")
	body := tc.substitute(msg.Body, m, t, "message.body")
	return "*" + title.escapedMarkdownV2() + "* \n\n" + body.escapedMarkdownV2()
}

// render translates a template into rflow text with ${{ }} expressions.
func (tc *templateContext) render(tpl string, m *Monitor, t *Trigger, field string) string {
	return tc.substitute(tpl, m, t, field).text(func(s string) string { return s })
}

// rendered is a template after substitution: literal text with holes
// for run-time expressions.
type rendered struct {
	parts []part
}

type part struct {
	text string // literal text, or
	expr string // an expression (without ${{ }})
}

func (r rendered) text(lit func(string) string) string {
	var b strings.Builder
	for _, p := range r.parts {
		if p.expr != "" {
			b.WriteString("${{ " + p.expr + " }}")
		} else {
			b.WriteString(escapeText(lit(p.text)))
		}
	}
	return b.String()
}

// markdownHole stands for an expression while the text around it is
// escaped: private-use runes around digits, which MarkdownV2 leaves alone
// and no template holds.
var markdownHole = regexp.MustCompile("\uE010(\\d+)\uE011")

// escapedMarkdownV2 escapes the text the way Monitor's Telegram builder
// does, treating each expression as a word (values are numbers, hex and
// addresses, which need no escape).
func (r rendered) escapedMarkdownV2() string {
	var flat strings.Builder
	var exprs []string
	for _, p := range r.parts {
		if p.expr != "" {
			fmt.Fprintf(&flat, "\uE010%d\uE011", len(exprs))
			exprs = append(exprs, p.expr)
		} else {
			flat.WriteString(p.text)
		}
	}
	esc := escapeMarkdownV2(flat.String())
	var out rendered
	last := 0
	for _, loc := range markdownHole.FindAllStringSubmatchIndex(esc, -1) {
		out.parts = append(out.parts, part{text: esc[last:loc[0]]})
		i, _ := strconv.Atoi(esc[loc[2]:loc[3]])
		out.parts = append(out.parts, part{expr: exprs[i]})
		last = loc[1]
	}
	out.parts = append(out.parts, part{text: esc[last:]})
	return out.text(func(s string) string { return s })
}

// substitute resolves each ${…} of tpl: values known at import time (the
// monitor's name, the event's signature) become text, per-event values
// become expressions, and what an event run does not have is kept as
// written and reported.
func (tc *templateContext) substitute(tpl string, m *Monitor, t *Trigger, field string) rendered {
	var r rendered
	last := 0
	for _, loc := range templateVar.FindAllStringSubmatchIndex(tpl, -1) {
		r.parts = append(r.parts, part{text: tpl[last:loc[0]]})
		name := tpl[loc[2]:loc[3]]
		p, ok := tc.variable(name)
		if !ok {
			what := fmt.Sprintf("trigger %s %s: ${%s}", t.ID, field, name)
			if hint, monitorVar := tc.unmappedHint(name); monitorVar {
				tc.b.leftOut(m, what, hint)
			} else {
				tc.b.note(t.File, m.Name, what, hint, false)
			}
			p = part{text: tpl[loc[0]:loc[1]]}
		}
		r.parts = append(r.parts, p)
		last = loc[1]
	}
	r.parts = append(r.parts, part{text: tpl[last:]})
	return r
}

// variable maps one Monitor template variable.
func (tc *templateContext) variable(name string) (part, bool) {
	switch name {
	case "monitor.name", "monitor_name":
		return part{text: tc.monitor.Name}, true
	case "transaction.hash", "transaction_hash":
		return part{expr: "event.tx_hash"}, true
	case "events.0.signature", "event_0_signature":
		return part{text: tc.sig}, true
	case "events":
		return tc.matchReasons(), true
	case "functions":
		return part{text: ""}, true // an event run matched no function
	}
	var arg string
	if a, ok := strings.CutPrefix(name, "events.0.args."); ok {
		arg = a
	} else if a, ok := strings.CutPrefix(name, "event_0_"); ok {
		arg = a
	} else {
		return part{}, false
	}
	_, rname, err := eventInput(tc.ev, arg)
	if err != nil {
		return part{}, false
	}
	return part{expr: "event" + fieldRef(rname)}, true
}

// unmappedHint says what to do about a variable an event run cannot fill;
// monitorVar is false for text Monitor would also have sent as written.
func (tc *templateContext) unmappedHint(name string) (hint string, monitorVar bool) {
	switch {
	case strings.HasPrefix(name, "transaction.") || strings.HasPrefix(name, "transaction_"):
		return "an event run knows the log (event.tx_hash, event.block, event.address), not the transaction's from/to/value: fetch them with an http_call to eth_getTransactionByHash if you need them; the text is kept as written", true
	case strings.HasPrefix(name, "functions") || strings.HasPrefix(name, "function_"):
		return "function matches are not imported, so there are no function arguments; the text is kept as written", true
	case strings.HasPrefix(name, "events.") || strings.HasPrefix(name, "event_"):
		return "a run is one event: only events.0 (the run's own event) exists, with the arguments of " + tc.ev.Sig + "; the text is kept as written", true
	case strings.HasPrefix(name, "monitor.") || strings.HasPrefix(name, "monitor_"):
		return "only monitor.name is a Monitor variable; the text is kept as written", true
	}
	return "not a Monitor variable, so Monitor sent it as written, and so does rflow", false
}

// matchReasons renders ${events} the way Monitor's template formatter
// does, for the run's one event, with its arguments sorted by name.
func (tc *templateContext) matchReasons() part {
	type arg struct{ name, value string }
	var args []arg
	for i, in := range tc.ev.Inputs {
		n := in.Name
		if n == "" {
			n = strconv.Itoa(i)
		}
		ref := "event" + fieldRef(rflowArgName(in, i))
		switch in.Type.T {
		case abi.IntTy, abi.UintTy:
			ref = "format_units(" + ref + ", 0)" // exact decimal text
		case abi.SliceTy, abi.ArrayTy, abi.TupleTy:
			ref = "toJSON(" + ref + ")"
		default:
			ref = "string(" + ref + ")"
		}
		args = append(args, arg{n, ref})
	}
	sort.Slice(args, func(i, j int) bool { return args[i].name < args[j].name })
	var b strings.Builder
	b.WriteString("\n\n*Matched Events:*\n\n*Reason 1*\n\n*Signature:* `" + tc.sig + "`\n\n*Params:*\n")
	expr := exprString(b.String())
	for _, a := range args {
		expr += " + " + exprString("\n"+a.name+": `") + " + " + a.value + " + \"`\""
	}
	return part{expr: expr}
}

// escapeText makes literal text safe in a value rflow reads for ${VAR}
// references and ${{ }} expressions: a "${" that is not ours is written
// as an expression producing "$".
func escapeText(s string) string {
	return strings.ReplaceAll(s, "${", "${{ '$' }}{")
}

var markdownV2Entity = regexp.MustCompile("(?s)```.*?```|`[^`]*`|\\*[^*]*\\*|_[^_]*_|~[^~]*~|\\[([^\\]]+)\\]\\(([^)]+)\\)")

// escapeMarkdownV2 is Monitor's Telegram escape: special characters
// outside entities get a backslash; links keep their shape with label and
// URL escaped.
func escapeMarkdownV2(text string) string {
	esc := func(s string) string {
		var b strings.Builder
		for _, c := range s {
			if strings.ContainsRune("_*[]()~`>#+-=|{}.!\\", c) {
				b.WriteByte('\\')
			}
			b.WriteRune(c)
		}
		return b.String()
	}
	var out strings.Builder
	last := 0
	for _, loc := range markdownV2Entity.FindAllStringSubmatchIndex(text, -1) {
		out.WriteString(esc(text[last:loc[0]]))
		if loc[2] >= 0 {
			out.WriteString("[" + esc(text[loc[2]:loc[3]]) + "](" + esc(text[loc[4]:loc[5]]) + ")")
		} else {
			out.WriteString(text[loc[0]:loc[1]])
		}
		last = loc[1]
	}
	out.WriteString(esc(text[last:]))
	return out.String()
}
