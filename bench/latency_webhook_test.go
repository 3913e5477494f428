package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// BenchmarkWebhookToThirdStep is the latency of one workflow on an
// otherwise idle `rflow start` (default settings): from a webhook POST to
// the last of its three http_call steps done (the run's finished_at, set by
// the transaction that journals that step's outcome), one run at a time.
// It also reports the POST to the third call's arrival at the endpoint.
func BenchmarkWebhookToThirdStep(b *testing.B) {
	const samples = 100
	ctx := context.Background()
	bin := buildRflow(b)
	ep := newEndpoint(b)
	api, pool := startRflowHTTP(b, bin, ep.URL)
	client := &http.Client{Timeout: time.Minute}
	var done, third []time.Duration
	var runs []string
	sentAt := map[string]time.Time{}
	prefix := uuid.NewString()
	for range b.N {
		for i := range samples + 5 {
			sent := time.Now()
			id, err := postHook(client, api, fmt.Sprintf("%s-%d", prefix, i))
			require.NoError(b, err)
			var finished *time.Time
			deadline := time.Now().Add(time.Minute)
			for finished == nil {
				require.NoError(b, pool.QueryRow(ctx, `SELECT max(finished_at) FROM rflow.workflow_runs WHERE id = $1 AND status = 'completed'`,
					id).Scan(&finished))
				if finished == nil {
					if time.Now().After(deadline) {
						b.Fatalf("run %s not completed after 1m", id)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			at, ok := ep.thirdCall(id)
			require.True(b, ok)
			if i >= 5 { // the first runs warm up connections and plans
				done, third = append(done, finished.Sub(sent)), append(third, at.Sub(sent))
				runs, sentAt[id] = append(runs, id), sent
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	slices.Sort(done)
	slices.Sort(third)
	p50, p99 := done[len(done)/2], done[len(done)*99/100]
	t50, t99 := third[len(third)/2], third[len(third)*99/100]
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	fmt.Printf("webhook POST -> third http_call step done, %d runs one at a time: p50 %s p99 %s (POST -> third call arrives: p50 %s p99 %s)\n",
		len(done), ms(p50), ms(p99), ms(t50), ms(t99))
	printStepGaps(b, pool, runs, sentAt)
	summary.addAbs("webhook → third of 3 http_call steps done, p50", float64(p50.Milliseconds()), "ms", "≤ 50 ms", p50 <= 50*time.Millisecond)
	summary.addAbs("webhook → third of 3 http_call steps done, p99", float64(p99.Milliseconds()), "ms", "reported", true)
}

// printStepGaps prints where a run's time went, as medians over runs: the
// claim (POST to the first step's row), each step's pickup by River (its
// row or its predecessor's outcome to its start) and each step's
// execution (start to outcome), from the step journal's timestamps.
func printStepGaps(b *testing.B, pool *pgxpool.Pool, runs []string, sent map[string]time.Time) {
	rows, err := pool.Query(context.Background(), `
		SELECT run_id::text, step_key, created_at, started_at, finished_at FROM rflow.step_runs
		WHERE run_id = ANY($1::uuid[]) ORDER BY run_id, step_key`, runs)
	require.NoError(b, err)
	type times struct{ created, started, finished time.Time }
	steps := map[string][]times{}
	for rows.Next() {
		var id, key string
		var t times
		require.NoError(b, rows.Scan(&id, &key, &t.created, &t.started, &t.finished))
		steps[id] = append(steps[id], t)
	}
	require.NoError(b, rows.Err())
	names := []string{"POST → a journaled", "a pickup", "a run", "b pickup", "b run", "c pickup", "c run"}
	gaps := make([][]float64, len(names))
	for id, s := range steps {
		if len(s) != 3 {
			continue
		}
		at := []time.Time{sent[id], s[0].created, s[0].started, s[0].finished, s[1].started, s[1].finished, s[2].started, s[2].finished}
		for i := range names {
			gaps[i] = append(gaps[i], float64(at[i+1].Sub(at[i]).Microseconds())/1000)
		}
	}
	fmt.Print("  medians, ms:")
	for i, n := range names {
		fmt.Printf(" %s %.1f;", n, median(gaps[i]))
	}
	fmt.Println()
}
