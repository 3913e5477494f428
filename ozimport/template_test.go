package ozimport

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Both of Monitor's template styles translate: the nested one
// (${events.0.args.x}) and the flat one of its first releases
// (${event_0_x}); what an event run cannot fill is kept and reported.
func TestTemplateVariables(t *testing.T) {
	t.Parallel()
	p := testProbe(t)
	m := &Monitor{Name: "Probe ${watch}", File: "monitors/p.json"}
	tr := &Trigger{ID: "hook", File: "triggers/t.json"}
	for _, tc := range []struct {
		tpl, want string
		leftOut   bool
		noted     bool
	}{
		{"${monitor.name}/${monitor_name}", "Probe ${{ '$' }}{watch}/Probe ${{ '$' }}{watch}", false, false},
		{"${transaction.hash} ${transaction_hash}", "${{ event.tx_hash }} ${{ event.tx_hash }}", false, false},
		{"${events.0.args.amount} ${event_0_amount} ${events.0.args.9}", "${{ event.amount }} ${{ event.amount }} ${{ event.arg9 }}", false, false},
		{"${events.0.signature}|${event_0_signature}", "Probe(address,uint256)|Probe(address,uint256)", false, false},
		{"a${functions}b", "ab", false, false},
		{"${transaction.from}", "${{ '$' }}{transaction.from}", true, false},
		{"${events.1.args.amount}", "${{ '$' }}{events.1.args.amount}", true, false},
		{"${functions.0.args.to}", "${{ '$' }}{functions.0.args.to}", true, false},
		{"${event_0_nope}", "${{ '$' }}{event_0_nope}", true, false},
		{"${HOME} and $ {x}", "${{ '$' }}{HOME} and $ {x}", false, true},
	} {
		b := newBuilder(&Config{})
		tc2 := &templateContext{b: b, monitor: m, ev: p.event, sig: "Probe(address,uint256)"}
		require.Equal(t, tc.want, tc2.render(tc.tpl, m, tr, "message.body"), tc.tpl)
		left, noted := 0, 0
		for _, f := range b.findings {
			if f.LeftOut {
				left++
			} else {
				noted++
			}
		}
		require.Equal(t, tc.leftOut, left > 0, tc.tpl)
		require.Equal(t, tc.noted, noted > 0, tc.tpl)
	}
}

func TestEscapeMarkdownV2(t *testing.T) {
	t.Parallel()
	require.Equal(t, `a\.b \(c\) *bold* `+"`code.x`"+` [l\.1](https://x\.y/z\_1) 5\-3\!`,
		escapeMarkdownV2("a.b (c) *bold* `code.x` [l.1](https://x.y/z_1) 5-3!"))
}
