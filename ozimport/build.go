package ozimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// builder turns a Config into the files of an rflow project.
type builder struct {
	cfg       *Config
	networks  []*Network // used by a converted monitor, in first-use order
	contracts ylist
	abis      map[string][]byte // file (relative to the project) → ABI JSON
	workflows []workflowFile
	env       []EnvVar
	findings  []Finding
	names     map[string]bool // rflow names taken (contracts, workflows)
}

// EnvVar is a variable the imported project reads as ${NAME}.
type EnvVar struct {
	Name    string
	Comment string // what it is and where its value came from
	Example string // a value for .env.example, or ""
	URL     bool   // the value is a URL (validation stands in a URL)
}

type workflowFile struct {
	name   string
	source string // the monitor and condition it came from
	path   string // relative to the project
	paused bool
	body   []byte
}

func newBuilder(cfg *Config) *builder {
	return &builder{cfg: cfg, abis: map[string][]byte{}, names: map[string]bool{}}
}

// note records a finding about a file, optionally for a monitor.
func (b *builder) note(file, monitor, what, instead string, leftOut bool) {
	b.findings = append(b.findings, Finding{File: file, Monitor: monitor, What: what, Instead: instead, LeftOut: leftOut})
}

// leftOut records a part of monitor m that the project does not carry.
func (b *builder) leftOut(m *Monitor, what, instead string) {
	b.note(m.File, m.Name, what, instead, true)
}

// envRef registers variable name and returns its ${NAME} reference.
func (b *builder) envRef(name, comment, example string, url bool) string {
	for _, e := range b.env {
		if e.Name == name {
			return "${" + name + "}"
		}
	}
	b.env = append(b.env, EnvVar{Name: name, Comment: comment, Example: example, URL: url})
	return "${" + name + "}"
}

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretRef maps a Monitor secret to the value rflow reads: a plain value
// stays as written (it was in the configuration file already), an
// environment variable keeps its name as ${NAME}, and a HashiCorp Cloud
// Vault secret becomes ${suggest}, a variable to set from the vault.
func (b *builder) secretRef(s SecretValue, file, suggest, what string, url bool) string {
	k, _ := s.kind() // checked when the file was read
	switch k {
	case secretEnv:
		name := s.Value
		if !envVarName.MatchString(name) {
			name = envName(name)
			b.note(file, "", fmt.Sprintf("%s: environment variable %q", what, s.Value),
				fmt.Sprintf("rflow's ${VAR} takes letters, digits and _; the project reads ${%s}: set it to the value of %s", name, s.Value), false)
		}
		return b.envRef(name, what+" (Monitor read it from the environment too).", "", url)
	case secretVault:
		name := envName(suggest)
		b.note(file, "", fmt.Sprintf("%s: HashiCorp Cloud Vault secret %q", what, s.Value),
			fmt.Sprintf("rflow reads secrets from the environment: export the vault secret as %s (e.g. with the vault agent or your deployment's secret store)", name), false)
		return b.envRef(name, fmt.Sprintf("%s: HashiCorp Cloud Vault secret %q in Monitor.", what, s.Value), "", url)
	}
	return escapeText(s.Value)
}

// useNetwork marks n as written to the project.
func (b *builder) useNetwork(n *Network) {
	for _, u := range b.networks {
		if u == n {
			return
		}
	}
	b.networks = append(b.networks, n)
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// rflowName makes a name rflow accepts for networks, contracts and
// workflows (a letter first, then letters, digits, - and _; no "__").
func rflowName(s string) string {
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if n == "" || !('a' <= n[0] && n[0] <= 'z') {
		n = "m-" + n
	}
	return strings.TrimSuffix(n[:min(len(n), 90)], "-")
}

// stepID makes a step id ([A-Za-z_][A-Za-z0-9_]*, at most 90 characters)
// from a trigger key.
func stepID(s string) string {
	id := strings.Trim(nonName.ReplaceAllString(s, "_"), "_")
	if id == "" || isDigit(id[0]) {
		id = "t_" + id
	}
	return id[:min(len(id), 90)]
}

// uniqueIn returns name, or name<sep>2, name<sep>3… when taken has it, and
// records it; names stay within rflow's 100 characters.
func uniqueIn(taken map[string]bool, name, sep string) string {
	name = name[:min(len(name), 90)]
	n := name
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s%s%d", name, sep, i)
	}
	taken[n] = true
	return n
}

// unique returns a contract or workflow name no other one has.
func (b *builder) unique(name string) string { return uniqueIn(b.names, name, "-") }

// addContract writes one contract (and its ABI file) for address a of
// monitor m on network n and returns its name.
func (b *builder) addContract(m *Monitor, n *Network, a *AddressSpec, manyNets, manyAddrs bool, i int) string {
	name := rflowName(m.Name)
	if manyNets {
		name += "-" + networkName(n.Slug)
	}
	if manyAddrs {
		name += fmt.Sprintf("-%d", i+1)
	}
	name = b.unique(name)
	file := "abis/" + name + ".json"
	var pretty bytes.Buffer
	if json.Indent(&pretty, a.ContractSpec, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(a.ContractSpec)
	}
	pretty.WriteByte('\n')
	b.abis[file] = pretty.Bytes()

	// The checksum form: Monitor compares addresses case-insensitively, so
	// a mixed-case address with a wrong checksum worked there, and rflow
	// would refuse it.
	addr := common.HexToAddress(a.Address).Hex()
	start := "${" + startBlockVar(n) + "}"
	startComment := fmt.Sprintf("Where rflow starts reading %s's logs. Monitor resumed from data/%s_last_block.txt;\nset %s to that block (or the current head) before the first start.", n.Slug, n.Slug, startBlockVar(n))
	if isDevChain(*n.ChainID) {
		start = "${" + startBlockVar(n) + ":-0}"
		startComment = fmt.Sprintf("A local dev chain: from block 0 unless %s says otherwise.", startBlockVar(n))
	}
	example := ""
	if isDevChain(*n.ChainID) {
		example = "0"
	}
	b.envRef(startBlockVar(n), fmt.Sprintf("First block to read on network %s (chain %d).", n.Slug, *n.ChainID), example, false)
	c := ymap{}.add("name", name, fmt.Sprintf("From %s: addresses[%d] on %s.", m.File, i, n.Slug)).
		add("abi", "./"+file, "contract_spec, as written in the monitor.").
		add("network", networkName(n.Slug), "").
		add("address", addr, "").
		add("start_block", start, startComment)
	b.contracts = append(b.contracts, yitem{val: c})
	return name
}

// addWorkflow writes the workflow of one (monitor, event condition,
// contract): an event trigger with the translated where: and one step per
// Monitor trigger.
func (b *builder) addWorkflow(m *Monitor, t watched, eventKey string, ev abi.Event, field, sig, where, whereComment string, many bool) {
	name := rflowName(m.Name) + "-" + rflowName(ev.Name)
	if many {
		name += "-" + t.contract
	}
	name = b.unique(name)
	trig := ymap{}.add("contract", t.contract, "").add("event", eventKey, fmt.Sprintf("%s.signature: %s", field, sig))
	if where != "" {
		trig = trig.add("where", where, whereComment)
	}
	tc := &templateContext{b: b, monitor: m, ev: ev, sig: strings.ReplaceAll(sig, " ", "")}
	var steps ylist
	ids := map[string]bool{}
	for _, id := range m.Triggers {
		if s := b.convertTrigger(m, b.cfg.Triggers[id], tc); s != nil { // checkTriggers found each
			s[0].val = uniqueIn(ids, s[0].val.(string), "_") // keys "a-b" and "a_b" are two steps
			steps = append(steps, yitem{val: s})
		}
	}
	if len(steps) == 0 {
		steps = append(steps, yitem{val: ymap{}.add("id", "matched", "The monitor has no trigger rflow can run (see IMPORT.md): the run records the match.").add("noop", ymap{}, "")})
	}
	// A description is not rendered, so a "${" of the monitor's name is
	// broken up rather than escaped.
	desc := fmt.Sprintf("Imported from OpenZeppelin Monitor: monitor %q (%s), %s.", strings.ReplaceAll(m.Name, "${", "$ {"), m.File, field)
	header := fmt.Sprintf("One run per %s log of %s on %s that matches, once the network's confirmations deep.\n%s", ev.Name, t.contract, t.network.Slug, desc)
	if m.Paused {
		header += "\nThe monitor is paused in Monitor, so rflow.yaml does not include this file: see IMPORT.md."
	}
	w := ymap{}.add("name", name, "").
		add("description", desc, "").
		add("trigger", ymap{}.add("event", trig, ""), "").
		add("steps", steps, "")
	path := "workflows/" + name + ".yaml"
	if m.Paused {
		path = "workflows/paused/" + name + ".yaml"
	}
	b.workflows = append(b.workflows, workflowFile{name: name, source: desc, path: path, paused: m.Paused, body: renderYAML(header, w)})
}

// checkTriggers reports a monitor's trigger keys that no triggers/ file
// defines: Monitor refuses to start with one.
func (b *builder) checkTriggers(m *Monitor) error {
	for i, id := range m.Triggers {
		if b.cfg.Triggers[id] == nil {
			return &InputError{File: m.File, Field: fmt.Sprintf("triggers[%d]", i),
				Msg: fmt.Sprintf("no trigger %q under triggers/", id)}
		}
	}
	return nil
}
