package trigger_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/trigger"
)

// TestABIIntegersAsText: in an event's payload every decoded argument's
// integers are decimal strings, small or 2^255, nested or not, while the
// log's own numbers stay numbers; a read's whole result is the ABI's; other
// kinds and undecodable logs are shown as they are.
func TestABIIntegersAsText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind     trigger.Kind
		in, want string
	}{
		{trigger.Event,
			`{"event":{"amount":42,"big":57896044618658097711785492504343953926634992332820282019728792003956564819969,"ids":[1,2],"pos":{"size":7,"owner":"0xA"},"sender":"0xB","block":12,"log_index":3,"tx_log_index":0,"block_hash":"0xC","tx_hash":"0xD","address":"0xE"},"block":12,"phase":"confirmed"}`,
			`{"block":12,"event":{"address":"0xE","amount":"42","big":"57896044618658097711785492504343953926634992332820282019728792003956564819969","block":12,"block_hash":"0xC","ids":["1","2"],"log_index":3,"pos":{"owner":"0xA","size":"7"},"sender":"0xB","tx_hash":"0xD","tx_log_index":0},"phase":"confirmed"}`},
		{trigger.Read, `{"result":42,"block":9,"block_hash":"0xF"}`, `{"block":9,"block_hash":"0xF","result":"42"}`},
		{trigger.Read, `{"result":{"reserve0":100,"reserve1":200,"who":"0xA"},"block":9}`, `{"block":9,"result":{"reserve0":"100","reserve1":"200","who":"0xA"}}`},
		{trigger.Event, `{"log":{"data":"0x"},"block":5,"phase":"head"}`, `{"log":{"data":"0x"},"block":5,"phase":"head"}`},
		{trigger.Webhook, `{"headers":{},"body":{"n":1}}`, `{"headers":{},"body":{"n":1}}`},
		{trigger.Manual, `{"input":{"n":1}}`, `{"input":{"n":1}}`},
		{trigger.Event, `not json`, `not json`},
	}
	for _, c := range cases {
		got := trigger.ABIIntegersAsText(c.kind, json.RawMessage(c.in))
		require.Equal(t, c.want, string(got), "%s %s", c.kind, c.in)
	}
}
