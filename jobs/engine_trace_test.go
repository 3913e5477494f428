package jobs_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestRunIsOneTrace: the claim, every step (in whichever job and worker
// they run) and the send's transaction outcome land in one trace, named
// for the steps and carrying the transaction hash; a second run is a
// trace of its own.
func TestRunIsOneTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	recv := newReceiver(t)
	project := chainProject(t, fmt.Sprintf(`
name: traced
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "${OPS_KEY}" }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: ask
        http_call: { method: POST, url: "%[2]s/ask", body: { n: 1 } }
      - id: pay
        send: { wallet: ops, network: local, to: "0x000000000000000000000000000000000000dEaD", value: "1", confirmations: 1 }
      - id: tell
        http_call: { method: POST, url: "%[2]s/tell", body: "${{ steps.pay.output.hash }}" }
`, node.URL, recv.URL), func(k string) (string, bool) {
		if k == "OPS_KEY" {
			return anviltest.DevKeys[2], true
		}
		return os.LookupEnv(k)
	})
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := startEngineWith(t, jobs.Config{Pool: pool, URL: url, Project: project, FetchCooldown: time.Millisecond,
		TracerProvider: tp})
	_, err = e.SyncWorkflows(ctx)
	require.NoError(t, err)
	b := &testBundle{pool: pool, engine: e, project: project, recv: recv}

	run := b.waitRun(t, b.manual(t, "pay", "one", nil))
	require.Equal(t, store.RunCompleted, run.Status, "%v", run.Error)
	other := b.waitRun(t, b.manual(t, "pay", "two", nil))
	require.Equal(t, store.RunCompleted, other.Status)
	hash := string(b.steps(t, run.ID)["pay"].Output)

	byRun := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.GetSpans().Snapshots() {
		for _, a := range s.Attributes() {
			if a.Key == "rflow.run.id" {
				byRun[a.Value.AsString()] = append(byRun[a.Value.AsString()], s)
			}
		}
	}
	own := byRun[run.ID.String()]
	names := map[string]bool{}
	traceID := own[0].SpanContext().TraceID()
	for _, s := range own {
		names[s.Name()] = true
		require.Equal(t, traceID, s.SpanContext().TraceID(), "span %q is in another trace", s.Name())
	}
	for _, want := range []string{"trigger manual", "claim", "step ask", "step pay", "step tell"} {
		require.True(t, names[want], "no span %q among %v", want, names)
	}
	require.NotEqual(t, traceID, byRun[other.ID.String()][0].SpanContext().TraceID(), "each run is its own trace")

	// The transaction's span names no run (it is the relayer's) but sits in
	// the run's trace, with the hash the step journaled.
	var tx sdktrace.ReadOnlySpan
	for _, s := range spans.GetSpans().Snapshots() {
		if s.Name() == "tx confirmed" && s.SpanContext().TraceID() == traceID {
			tx = s
		}
	}
	require.NotNil(t, tx, "no confirmed-transaction span in the run's trace")
	attrs := attribute.NewSet(tx.Attributes()...)
	h, ok := attrs.Value("rflow.tx.hash")
	require.True(t, ok)
	require.Contains(t, hash, h.AsString(), "the span carries the journaled hash")
}
