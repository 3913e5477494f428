package ozimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// Monitor is one monitors/*.json file.
type Monitor struct {
	File              string            `json:"-"`
	Name              string            `json:"name"`
	Paused            bool              `json:"paused"`
	Networks          []string          `json:"networks"`
	Addresses         []AddressSpec     `json:"addresses"`
	MatchConditions   MatchConditions   `json:"match_conditions"`
	TriggerConditions []json.RawMessage `json:"trigger_conditions"`
	Triggers          []string          `json:"triggers"`
	ChainConfigs      json.RawMessage   `json:"chain_configurations"`
}

// AddressSpec is one watched contract: its address and, for EVM, its ABI.
type AddressSpec struct {
	Address      string          `json:"address"`
	ContractSpec json.RawMessage `json:"contract_spec"`
	abi          *abi.ABI
}

// MatchConditions are what a monitor matches: function calls, events and
// transaction properties.
type MatchConditions struct {
	Functions    []Condition `json:"functions"`
	Events       []Condition `json:"events"`
	Transactions []TxCond    `json:"transactions"`
}

// Condition is a function or event signature with an optional expression.
type Condition struct {
	Signature  string  `json:"signature"`
	Expression *string `json:"expression"`
}

// TxCond matches a transaction's status and fields.
type TxCond struct {
	Status     string  `json:"status"`
	Expression *string `json:"expression"`
}

// scriptCondition is a trigger_conditions entry: a filter script.
type scriptCondition struct {
	ScriptPath string          `json:"script_path"`
	Language   string          `json:"language"`
	Arguments  json.RawMessage `json:"arguments"`
	TimeoutMS  *uint64         `json:"timeout_ms"`
}

func parseMonitor(rel string, data []byte) (*Monitor, error) {
	m := &Monitor{File: rel}
	if err := decodeStrict(rel, "", data, m); err != nil {
		return nil, err
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, &InputError{File: rel, Field: "name", Msg: "missing: every monitor needs a unique name"}
	}
	for i, c := range m.MatchConditions.Events {
		if strings.TrimSpace(c.Signature) == "" {
			return nil, &InputError{File: rel, Field: fmt.Sprintf("match_conditions.events[%d].signature", i), Msg: "missing"}
		}
	}
	for i, raw := range m.TriggerConditions {
		var sc scriptCondition
		if err := decodeStrict(rel, fmt.Sprintf("trigger_conditions[%d]", i), raw, &sc); err != nil {
			return nil, err
		}
	}
	for i := range m.Addresses {
		a := &m.Addresses[i]
		field := fmt.Sprintf("addresses[%d]", i)
		if a.Address == "" {
			return nil, &InputError{File: rel, Field: field + ".address", Msg: "missing"}
		}
		spec := bytes.TrimSpace(a.ContractSpec)
		if len(spec) == 0 || string(spec) == "null" {
			continue
		}
		if spec[0] == '{' { // {"abi": [...]}, as a Foundry or Hardhat artifact holds it
			var art struct {
				ABI json.RawMessage `json:"abi"`
			}
			if json.Unmarshal(spec, &art) == nil && len(art.ABI) > 0 {
				spec = art.ABI
			}
		}
		if spec[0] != '[' {
			continue // a Stellar (SEP-48) or other non-EVM spec; judged with its network
		}
		parsed, err := abi.JSON(bytes.NewReader(spec))
		if err != nil {
			return nil, &InputError{File: rel, Field: field + ".contract_spec", Msg: "not a valid EVM ABI: " + err.Error()}
		}
		a.ContractSpec = spec
		a.abi = &parsed
	}
	return m, nil
}

// findEvent returns the event of a whose canonical signature is sig
// (Monitor's "Transfer(address,address,uint256)", spaces ignored).
func findEvent(a *abi.ABI, sig string) (string, abi.Event, bool) {
	want := strings.ReplaceAll(sig, " ", "")
	for key, ev := range a.Events {
		if ev.Sig == want {
			return key, ev, true
		}
	}
	return "", abi.Event{}, false
}

// watched is one (network, address) of a monitor, written as one contract.
type watched struct {
	network  *Network
	addr     *AddressSpec
	contract string // rflow contract name
}

// convertMonitor writes the monitor's contracts and one workflow per
// (event condition, watched contract), and notes everything else.
func (b *builder) convertMonitor(m *Monitor) error {
	b.noteUnmapped(m)
	var targets []watched
	for i, slug := range m.Networks {
		n := b.cfg.network(slug)
		if n == nil {
			return &InputError{File: m.File, Field: fmt.Sprintf("networks[%d]", i),
				Msg: fmt.Sprintf("no network with slug %q under networks/ (slugs: %s)", slug, strings.Join(b.slugs(), ", "))}
		}
		if !n.isEVM() {
			b.leftOut(m, fmt.Sprintf("network %s (%s): a %s network", slug, n.File, n.NetworkType),
				"rflow watches EVM chains only; keep running Monitor for this network")
			continue
		}
		b.useNetwork(n)
		for j := range m.Addresses {
			a := &m.Addresses[j]
			if !common.IsHexAddress(a.Address) {
				return &InputError{File: m.File, Field: fmt.Sprintf("addresses[%d].address", j),
					Msg: fmt.Sprintf("%q is not a 0x-prefixed 20-byte hex address (network %s is EVM)", a.Address, slug)}
			}
			if a.abi == nil {
				b.leftOut(m, fmt.Sprintf("address %s on %s has no contract_spec", a.Address, slug),
					"add the contract's ABI (abis/<name>.json) and a contracts: entry; rflow decodes events by their ABI")
				continue
			}
			targets = append(targets, watched{network: n, addr: a, contract: b.addContract(m, n, a, len(m.Networks) > 1, len(m.Addresses) > 1, j)})
		}
	}
	if len(m.MatchConditions.Events) == 0 && len(targets) > 0 {
		b.leftOut(m, "no match_conditions.events", "rflow starts runs from events: add an event condition, or see the notes above for functions and transactions")
	}
	for i, c := range m.MatchConditions.Events {
		if err := b.convertEventCondition(m, i, c, targets); err != nil {
			return err
		}
	}
	return nil
}

// convertEventCondition writes one workflow per watched contract whose ABI
// declares the condition's event.
func (b *builder) convertEventCondition(m *Monitor, i int, c Condition, targets []watched) error {
	field := fmt.Sprintf("match_conditions.events[%d]", i)
	if len(targets) == 0 {
		b.leftOut(m, fmt.Sprintf("%s %s: the monitor watches no EVM address with a contract_spec", field, c.Signature),
			"an rflow event trigger watches one contract: add the address and its ABI (see the notes above), then the workflow")
		return nil
	}
	declared := false
	for _, t := range targets {
		key, ev, ok := findEvent(t.addr.abi, c.Signature)
		if !ok {
			continue
		}
		declared = true
		if ev.Anonymous {
			b.leftOut(m, fmt.Sprintf("%s %s on %s: the event is anonymous", field, c.Signature, t.contract),
				"rflow filters logs by topic 0, which an anonymous event does not have; watch it with a block trigger and an http_call")
			continue
		}
		where, whereComment := "", ""
		if c.Expression != nil && strings.TrimSpace(*c.Expression) != "" {
			w, err := TranslateExpression(*c.Expression, ev)
			if err != nil {
				b.leftOut(m, fmt.Sprintf("%s %s: expression %q: %v", field, c.Signature, *c.Expression, err),
					"the workflow for this condition was not written; write its where: by hand (docs/workflows.md, Expressions)")
				continue
			}
			where = w
			whereComment = fmt.Sprintf("%s.expression: %s", field, *c.Expression)
		}
		b.addWorkflow(m, t, key, ev, field, c.Signature, where, whereComment, len(targets) > 1)
	}
	if !declared {
		b.leftOut(m, fmt.Sprintf("%s %s: no contract_spec of this monitor declares the event", field, c.Signature),
			"add the event to the contract's ABI; Monitor could not decode it either")
	}
	return nil
}

// noteUnmapped lists the parts of a monitor rflow has no equivalent for.
func (b *builder) noteUnmapped(m *Monitor) {
	for i, f := range m.MatchConditions.Functions {
		expr := ""
		if f.Expression != nil {
			expr = " where " + *f.Expression
		}
		b.leftOut(m, fmt.Sprintf("match_conditions.functions[%d]: calls of %s%s", i, f.Signature, expr),
			"rflow triggers on events, not on calls: emit an event from the function and match that, or keep Monitor for calls")
	}
	for i, t := range m.MatchConditions.Transactions {
		expr := ""
		if t.Expression != nil {
			expr = " where " + *t.Expression
		}
		b.leftOut(m, fmt.Sprintf("match_conditions.transactions[%d]: transactions with status %s%s", i, t.Status, expr),
			"rflow does not match transactions; an event trigger only sees logs of successful transactions, which covers status Success")
	}
	for i, raw := range m.TriggerConditions {
		var sc scriptCondition
		_ = json.Unmarshal(raw, &sc) // checked by parseMonitor
		b.leftOut(m, fmt.Sprintf("trigger_conditions[%d]: filter script %s (%s)", i, sc.ScriptPath, sc.Language),
			"rflow runs no scripts: put the filter's logic in the workflow's where:, or in an http_call to a service that decides, followed by steps with if:")
	}
	if len(m.ChainConfigs) > 0 && string(m.ChainConfigs) != "null" && string(m.ChainConfigs) != "[]" {
		b.leftOut(m, "chain_configurations", "not translated; see its Monitor documentation for what it configures and set the rflow equivalent by hand")
	}
}

func (b *builder) slugs() []string {
	s := make([]string, 0, len(b.cfg.Networks))
	for _, n := range b.cfg.Networks {
		s = append(s, n.Slug)
	}
	return s
}
