package ozimport

import (
	"encoding/json"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

// probe is testdata/probe: a project whose Probe event has an argument of
// every kind Monitor expressions compare.
type probe struct {
	project *workflow.Project
	event   abi.Event
}

var loadProbe = sync.OnceValues(func() (*probe, error) {
	p, err := workflow.Load("testdata/probe/rflow.yaml", workflow.LoadOptions{})
	if err != nil {
		return nil, err
	}
	f, err := os.Open("testdata/probe/Probe.abi.json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := abi.JSON(f)
	if err != nil {
		return nil, err
	}
	return &probe{project: p, event: a.Events["Probe"]}, nil
})

func testProbe(t testing.TB) *probe {
	t.Helper()
	p, err := loadProbe()
	require.NoError(t, err)
	return p
}

// compile compiles where as the condition of a Probe workflow, as rflow
// validate would.
func (p *probe) compile(where string) (*workflow.Workflow, error) {
	body, _ := json.Marshal(map[string]any{
		"name":    "probe",
		"trigger": map[string]any{"event": map[string]any{"contract": "Probe", "event": "Probe", "where": where}},
		"steps":   []any{map[string]any{"id": "a", "noop": map[string]any{}}},
	})
	return workflow.ParseWorkflow(p.project, "probe.json", body)
}

// compileText compiles text as the notify text of a Probe workflow.
func (p *probe) compileText(text string) (*workflow.Workflow, error) {
	body, _ := json.Marshal(map[string]any{
		"name":    "probe",
		"trigger": map[string]any{"event": map[string]any{"contract": "Probe", "event": "Probe"}},
		"steps":   []any{map[string]any{"id": "a", "notify": map[string]any{"webhook": "https://example.invalid/", "text": text}}},
	})
	return workflow.ParseWorkflow(p.project, "probe.json", body)
}

// probeEvent is a decoded Probe log as the chain package hands it to
// expressions.
func probeEvent() workflow.Env {
	return workflow.Env{"event": map[string]any{
		"who": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "amount": big.NewInt(5000), "delta": big.NewInt(-3),
		"memo": "Big Deposit", "ok": true, "tag": "0xABCD000000000000000000000000000000000000000000000000000000000000",
		"ids": []any{big.NewInt(7), big.NewInt(9)}, "owners": []any{"0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"},
		"info": map[string]any{"id": big.NewInt(1), "label": "Main"}, "arg9": big.NewInt(4),
		"block": uint64(10), "block_hash": "0x01", "tx_hash": "0x02", "log_index": uint64(0), "address": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
	}}
}

func TestTranslateExpression(t *testing.T) {
	t.Parallel()
	p := testProbe(t)
	for _, tc := range []struct {
		monitor, rflow string
		matches        bool // on probeEvent
	}{
		{"amount > 1000", `event.amount > 1000`, true},
		{"amount <= '4999'", `event.amount <= 4999`, false},
		{"amount == 0x1388", `event.amount == bigint("0x1388")`, true},
		{"amount >= 00042", `event.amount >= 42`, true},
		{"delta < -2", `event.delta < -2`, true},
		{"who == '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'", `event.who == "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"`, true},
		{"who != 0x70997970C51812dc3A010C7d01b50e0d17dc79C8", `event.who != "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"`, false},
		{"memo == 'big deposit'", `lower(event.memo) == "big deposit"`, true},
		{`memo contains "DEP"`, `lower(event.memo) contains "dep"`, true},
		{"memo starts_with 'big' AND memo ENDS_WITH 'deposit'", `lower(event.memo) startsWith "big" && lower(event.memo) endsWith "deposit"`, true},
		{"memo == active", `lower(event.memo) == "active"`, false},
		{`memo == 'it\'s ${HOME} {x}'`, `lower(event.memo) == "it's \x24\x7bhome\x7d \x7bx\x7d"`, false},
		{"ok == TRUE", `event.ok == true`, true},
		{"tag starts_with '0xabcd'", `lower(event.tag) startsWith "0xabcd"`, true},
		{"ids contains 9", `any(event.ids, {# == 9})`, true},
		{"ids[0] == 8", `event.ids[0] == 8`, false},
		{"owners contains '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc'", `any(event.owners, {# == "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"})`, true},
		{"info.label == 'main' AND info.id == 1", `lower(event.info.label) == "main" && event.info.id == 1`, true},
		{"9 > 3", `event.arg9 > 3`, true},
		{"1 > 10 OR amount < 10 AND ok == true", `event.amount > 10 || event.amount < 10 && event.ok == true`, true},
		{"(amount < 10 OR ok == true) AND memo contains 'x'", `(event.amount < 10 || event.ok == true) && lower(event.memo) contains "x"`, false},
		{"((amount > 1))", `event.amount > 1`, true},
	} {
		got, err := TranslateExpression(tc.monitor, p.event)
		require.NoError(t, err, tc.monitor)
		require.Equal(t, tc.rflow, got, tc.monitor)
		w, err := p.compile(got)
		require.NoError(t, err, "%s → %s", tc.monitor, got)
		ok, err := w.Trigger.Event.Where.Bool(probeEvent())
		require.NoError(t, err, got)
		require.Equal(t, tc.matches, ok, "%s → %s", tc.monitor, got)
	}
}

func TestTranslateExpressionRefuses(t *testing.T) {
	t.Parallel()
	p := testProbe(t)
	for _, tc := range []struct{ monitor, err string }{
		{"amout > 5", "amout is not an argument of Probe("},
		{"10 > 5", "argument index 10: Probe("},
		{"amount > 1.5", "an integer (uint256); Monitor cannot compare it with a fraction"},
		{"amount > -1", "unsigned"},
		{"amount contains 5", "is a number"},
		{"who > '0x1'", "compares only with == and !="},
		{"ok == yes", "compares with true or false"},
		{"memo > 'a'", "orders strings"},
		{`ids == '[1,2]'`, "comparing the whole array"},
		{`info == '(1,"main")'`, "Monitor compares it as text"},
		{"ids.x == 1", "not a tuple"},
		{"owners[2] == '0x0'", "has 2 elements"},
		{"amount >", "expected a value"},
		{"amount 5", "expected an operator"},
		{"(amount > 5", "closing parenthesis"},
		{"amount > 5 AND", "expected a condition"},
		{"memo == 'open", "no closing quote"},
		{"AND == 1", "keyword"},
		{"amount > 5 junk", "unexpected"},
		{strings.Repeat("(", 100) + "amount > 1" + strings.Repeat(")", 100), "nested deeper"},
	} {
		_, err := TranslateExpression(tc.monitor, p.event)
		require.ErrorContains(t, err, tc.err, tc.monitor)
	}
}
