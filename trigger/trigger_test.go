package trigger_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// TestPayloadsMatchDeclaredShape holds every payload builder to what the
// workflow checker lets steps read from `trigger` for that kind: a field
// the checker declares but the payload lacks would pass validation and fail
// at run time.
func TestPayloadsMatchDeclaredShape(t *testing.T) {
	t.Parallel()
	samples := map[trigger.Kind]any{
		trigger.Event:   trigger.EventPayload{Event: chain.Decoded{Event: "Deposit"}, Block: 7, Phase: string(chain.PhaseHead)},
		trigger.Cron:    trigger.CronPayload{Tick: "2026-01-01T00:00:00Z"},
		trigger.Block:   trigger.BlockPayload{Block: 7, BlockHash: "0xab"},
		trigger.Read:    trigger.ReadPayload{Result: 1, Block: 7, BlockHash: "0xab", Tick: "2026-01-01T00:00:00Z"},
		trigger.Webhook: trigger.WebhookPayload{Headers: map[string]string{}, Body: json.RawMessage(`{}`)},
		trigger.Manual:  trigger.ManualPayload{},
	}
	for _, k := range trigger.Kinds() {
		p, ok := samples[k]
		require.True(t, ok, "no payload sample for trigger kind %s", k)
		b, err := json.Marshal(p)
		require.NoError(t, err, k)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(b, &fields), k)
		fields["key"], fields["kind"] = "", "" // added by the engine
		require.Equal(t, workflow.TriggerVars(k), slices.Sorted(maps.Keys(fields)), "trigger kind %s", k)
	}
}

func TestManualPayloadWithoutInputIsNull(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(trigger.ManualPayload{})
	require.NoError(t, err)
	require.JSONEq(t, `{"input": null}`, string(b))
	b, err = json.Marshal(trigger.ManualPayload{Input: json.RawMessage(`{"a":1}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"input": {"a": 1}}`, string(b))
}

func TestKindValid(t *testing.T) {
	t.Parallel()
	require.True(t, trigger.Cron.Valid())
	require.False(t, trigger.Kind("crontab").Valid())
}
