package workflow_test

import (
	"fmt"
	"math/big"

	"github.com/rflow-dev/rflow/workflow"
)

// Load a project, then evaluate a workflow's trigger filter and a send value
// the way the engine does, with exact uint256 arithmetic.
func Example() {
	env := map[string]string{
		"OPS_PRIVATE_KEY": "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
		"HOOK_SECRET":     "hook", "API_SECRET": "api", "DATABASE_URL": "postgres://localhost/rflow",
		"SLACK_URL": "https://hooks.slack.example/T0/B0/x",
	}
	p, err := workflow.Load("../testdata/projects/reference/rflow.yaml", workflow.LoadOptions{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		fmt.Println(err) // every problem, one "file:line:col: message" per line
		return
	}
	fmt.Println(p.Summary())

	w := p.Workflow("refund-large-deposits")
	amount, _ := new(big.Int).SetString("57896044618658097711785492504343953926634992332820282019728792003956564819969", 10) // 2^255+1
	run := workflow.Env{"event": map[string]any{"sender": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "amount": amount}}

	ok, _ := w.Trigger.Event.Where.Bool(run)
	value, _ := w.Step("large").Send.Value.String(run)
	fmt.Println(ok, value)
	// Output:
	// 6 workflows (1 event, 1 cron, 1 block, 1 read, 1 webhook, 1 manual), 19 steps
	// true 578960446186580977117854925043439539266349923328202820197287920039565648199
}

// Expressions are compiled when the project loads; a mistake is reported
// with its position and a suggestion.
func ExampleParseWorkflow() {
	p, err := workflow.Load("../testdata/projects/bad-types/rflow.yaml", workflow.LoadOptions{})
	fmt.Println(p == nil, err != nil)

	base, _ := workflow.Load("../testdata/projects/warnings/rflow.yaml", workflow.LoadOptions{})
	_, err = workflow.ParseWorkflow(base, "body.yaml", []byte(`
name: api
trigger: { event: { contract: Vault, event: Deposit } }
steps:
  - id: notify
    notify: { slack: "https://hooks.example/x", text: "${{ event.amout }}" }
`))
	fmt.Println(err)
	// Output:
	// true true
	// body.yaml:6:66: in ${{ event.amout }}: unknown field amout of event Deposit; did you mean amount? (fields: address, amount, block, block_hash, log_index, sender, tx_hash, tx_log_index)
}
