package workflow

import (
	"strings"
)

// Finality tags: run_on: safe | finalized on event triggers and
// confirmations: safe | finalized on wait_for follow the node's block of
// that tag (eth_getBlockByNumber("finalized")) instead of a fixed depth. A
// network says whether its nodes serve the tags with finality: tags |
// none; validate cannot ask a node, so an undeclared network is a warning
// where a tag is used, and rflow start asks the node.

// networkFinality reads a network's finality: declaration.
func (l *loader) networkFinality(n *node, net *Network) {
	if n.isNull() {
		return
	}
	if s, ok := l.oneOf(n, "network "+net.Name+": finality", FinalityTags, FinalityNone); ok {
		net.Finality = s
	}
}

// checkTag reports a tag used at pos (by what) on network: an error when
// the network declares finality: none, a warning when it declares nothing.
func (l *loader) checkTag(pos Position, network, what, tag string) {
	n := l.p.Network(network)
	if n == nil {
		return // the unknown network is reported where it is named
	}
	switch n.Finality {
	case FinalityNone:
		l.errorf(pos, "%s: %s: network %s declares finality: none (its nodes serve no safe/finalized block tags); "+
			"use a depth (confirmations: N) or a network whose nodes serve the tags", what, tag, network)
	case "":
		l.warnf(pos, "%s: %s: network %s does not declare finality: tags; rflow start refuses to run if its node "+
			"does not serve the %q block tag (Ethereum PoS, OP Stack and Arbitrum nodes do)", what, tag, network, tag)
	}
}

// waitConfirmations reads a wait_for's confirmations: a depth, or a block
// tag (safe, finalized). A depth of 0 is warned about as elsewhere.
func (l *loader) waitConfirmations(n *node) (*int, string) {
	if n.isNull() {
		return nil, ""
	}
	s, ok := l.scalar(n, "confirmations")
	if !ok {
		return nil, ""
	}
	switch s {
	case TagSafe, TagFinalized:
		return nil, s
	}
	if _, err := parseInteger(s); err != nil {
		if _, isNum := n.val.(float64); !isNum {
			l.errorf(n.pos, "wait_for: confirmations must be a block count, %s or %s, not %q%s", TagSafe, TagFinalized,
				s, suggest(strings.ToLower(s), []string{TagSafe, TagFinalized}))
			return nil, ""
		}
	}
	return l.confirmations(n, "wait_for"), ""
}

// eventRunOn reads an event trigger's run_on, and checks a tagged one
// against the trigger's confirmations and its contract's network.
func (l *loader) eventRunOn(r, conf *node, et *EventTrigger, network string) {
	if r.isNull() {
		return
	}
	s, ok := l.oneOf(r, "run_on", RunOnHead, RunOnConfirmed, RunOnBoth, RunOnSafe, RunOnFinalized)
	if !ok {
		return
	}
	et.RunOn = s
	if s != RunOnSafe && s != RunOnFinalized {
		return
	}
	if !conf.isNull() {
		l.errorf(conf.pos, "event trigger: confirmations has no effect with run_on: %s (the node's %s block decides); "+
			"remove it, or use run_on: confirmed", s, s)
	}
	if network != "" {
		l.checkTag(r.pos, network, "event trigger run_on", s)
	}
}

// confirmationsTag rejects a block tag where only a depth is accepted,
// pointing at the key that takes it.
func (l *loader) confirmationsTag(n *node, what, instead string) bool {
	if n.isNull() || n.kind != nodeScalar {
		return false
	}
	if s, ok := n.val.(string); ok && (s == TagSafe || s == TagFinalized) {
		l.errorf(n.pos, "%s: confirmations takes a block count, not %s; %s", what, s, strings.ReplaceAll(instead, "TAG", s))
		return true
	}
	return false
}

// TagUse is one use of a finality tag: a trigger's run_on or a wait_for's
// confirmations, on the network it reads.
type TagUse struct {
	Network string
	Tag     string // TagSafe or TagFinalized
	// What names it for messages: "workflow W: trigger run_on: finalized".
	What string
}

// TagUses lists where the project's workflows use finality tags, so rflow
// start can check each network's node serves them.
func (p *Project) TagUses() []TagUse {
	var out []TagUse
	for _, w := range p.Workflows {
		if e := w.Trigger.Event; e != nil && (e.RunOn == RunOnSafe || e.RunOn == RunOnFinalized) {
			if c := p.Contract(e.Contract); c != nil {
				out = append(out, TagUse{Network: c.Network, Tag: e.RunOn, What: "workflow " + w.Name + ": trigger run_on: " + e.RunOn})
			}
		}
		if b := w.Trigger.Block; b != nil && (b.RunOn == RunOnSafe || b.RunOn == RunOnFinalized) {
			out = append(out, TagUse{Network: b.Network, Tag: b.RunOn, What: "workflow " + w.Name + ": block trigger run_on: " + b.RunOn})
		}
		walkSteps(w.allLists(), func(s *Step) {
			if s.WaitFor == nil || s.WaitFor.Finality == "" || s.WaitFor.Event == nil {
				return
			}
			if c := p.Contract(s.WaitFor.Event.Contract); c != nil {
				out = append(out, TagUse{Network: c.Network, Tag: s.WaitFor.Finality,
					What: "workflow " + w.Name + ": step " + s.ID + " wait_for confirmations: " + s.WaitFor.Finality})
			}
		})
	}
	return out
}
