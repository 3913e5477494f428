package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

func TestSpecYAML(t *testing.T) {
	spec := []byte(`{"name":"w","steps":[{"delay":"1s","id":"a"},{"id":"b","send":{"value":115792089237316195423570985008687907853269984665640564039457584007913129639935}}],` +
		`"trigger":{"webhook":{"idempotency_key":"${{ body.id }}","secret":"s3cret-literal"}},"x":{"secret":"${HOOK_SECRET}","token":"${T:-fallback}"}}`)
	got, err := specYAML(spec)
	require.NoError(t, err)
	require.Equal(t, `name: w
trigger:
  webhook:
    idempotency_key: ${{ body.id }}
    secret: (hidden)
steps:
  - id: a
    delay: 1s
  - id: b
    send:
      value: 115792089237316195423570985008687907853269984665640564039457584007913129639935
x:
  secret: ${HOOK_SECRET}
  token: (hidden)
`, got)
	_, err = specYAML([]byte(`{"name":"w"} {}`))
	require.Error(t, err)
	_, err = specYAML([]byte(`{"name":`))
	require.Error(t, err)
}

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	run := &store.Run{CreatedAt: t0, FinishedAt: at(1000)}
	steps := []stepRow{
		{StepRun: &store.StepRun{Key: "a", Kind: "http_call", Status: store.StepCompleted, CreatedAt: t0, StartedAt: at(0), FinishedAt: at(250)}},
		{StepRun: &store.StepRun{Key: "b", Kind: "send", Status: store.StepCompleted, CreatedAt: *at(250), StartedAt: at(250), FinishedAt: at(1000)}},
		{StepRun: &store.StepRun{Key: "c", Kind: "noop", Status: store.StepSkipped, CreatedAt: *at(1000)}},
	}
	aps := []*store.Approval{{StepKey: "b", Status: store.ApprovalApproved, CreatedAt: *at(300), DecidedAt: at(800)}}
	tl := newTimeline(run, steps, nil, aps, t0.Add(time.Hour))
	require.Len(t, tl.Rows, 3)
	require.Equal(t, "1s", tl.Span)
	require.Equal(t, segment{X: 0, W: 250}, stripText(tl.Rows[0].Bar))
	require.Equal(t, segment{X: 250, W: 750}, stripText(tl.Rows[1].Bar))
	require.Equal(t, []segment{{X: 300, W: 500}}, []segment{stripText(tl.Rows[1].Parts[0])})
	require.Equal(t, "approval", tl.Rows[1].Parts[0].Class)
	// An instant at the end of the axis stays visible and inside it.
	require.Equal(t, segment{X: 997, W: 3}, stripText(tl.Rows[2].Bar))

	require.Nil(t, tl.Rows[0].Before, "started as soon as reached")

	// A delay waits between being reached and starting.
	delayed := []stepRow{{StepRun: &store.StepRun{Key: "d", Kind: "delay", Status: store.StepCompleted, CreatedAt: t0, StartedAt: at(600), FinishedAt: at(600)}}}
	tl = newTimeline(run, delayed, nil, nil, t0.Add(time.Hour))
	require.Equal(t, segment{X: 0, W: 600}, stripText(*tl.Rows[0].Before))
	require.Equal(t, segment{X: 600, W: 3}, stripText(tl.Rows[0].Bar))

	// A step still waiting runs to now, which extends the axis.
	run.FinishedAt = nil
	steps[1].FinishedAt, steps[1].Status = nil, store.StepWaiting
	tl = newTimeline(run, steps[:2], nil, nil, t0.Add(2*time.Second))
	require.Equal(t, "2s", tl.Span)
	require.Equal(t, segment{X: 125, W: 875}, stripText(tl.Rows[1].Bar))
}

func stripText(s segment) segment { return segment{X: s.X, W: s.W} }
