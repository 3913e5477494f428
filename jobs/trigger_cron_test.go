package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

const cronProject = `
name: t
workflows:
  - name: catchup
    trigger: { cron: { schedule: "* * * * *", catch_up: true } }
    steps:
      - { id: ping, http_call: { url: "{{URL}}/catchup" } }
  - name: skip
    trigger: { cron: { schedule: "* * * * *" } }
    steps:
      - { id: ping, http_call: { url: "{{URL}}/skip" } }
`

// TestCronCatchUp: with catch_up, the minutes missed since the last claimed
// tick are claimed on boot; without it, they are skipped.
func TestCronCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, cronProject)
	last := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
	for _, wf := range []string{"catchup", "skip"} {
		_, err := b.pool.Exec(ctx, `
			INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, status)
			VALUES (gen_random_uuid(), $1, 1, $2, 'cron', 'completed')`, wf, last.Format(time.RFC3339))
		require.NoError(t, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.engine.RunCron(cctx)

	keys := func(wf string) map[string]bool {
		runs, err := store.ListRuns(ctx, b.pool, store.RunFilter{Workflow: wf, Limit: 100})
		require.NoError(t, err)
		out := map[string]bool{}
		for _, r := range runs {
			out[r.TriggerKey] = true
		}
		return out
	}
	require.Eventually(t, func() bool { return len(keys("catchup")) >= 6 }, 10*time.Second, 50*time.Millisecond)
	got := keys("catchup")
	for i := 1; i <= 4; i++ {
		require.True(t, got[last.Add(time.Duration(i)*time.Minute).Format(time.RFC3339)], "missed tick %d replayed", i)
	}
	time.Sleep(time.Second)
	for k := range keys("skip") {
		tick, err := time.Parse(time.RFC3339, k)
		require.NoError(t, err)
		require.False(t, tick.After(last) && tick.Before(time.Now().UTC().Truncate(time.Minute)), "tick %s should have been skipped", k)
	}
}

// TestCronCatchUpCap: catch_up replays at most the newest 100 missed slots.
func TestCronCatchUpCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, cronProject)
	last := time.Now().UTC().Truncate(time.Minute).Add(-300 * time.Minute)
	_, err := b.pool.Exec(ctx, `
		INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, status)
		VALUES (gen_random_uuid(), 'catchup', 1, $1, 'cron', 'completed')`, last.Format(time.RFC3339))
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.engine.RunCron(cctx)

	ticks := func() []time.Time {
		rows, err := b.pool.Query(ctx, `SELECT trigger_key FROM rflow.workflow_runs WHERE workflow_name = 'catchup' AND trigger_key > $1 ORDER BY trigger_key`,
			last.Format(time.RFC3339))
		require.NoError(t, err)
		defer rows.Close()
		var out []time.Time
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			tick, err := time.Parse(time.RFC3339, k)
			require.NoError(t, err)
			out = append(out, tick)
		}
		return out
	}
	require.Eventually(t, func() bool { return len(ticks()) >= 100 }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	got := ticks()
	// 100 slots, or 101 when a minute turned while the test ran.
	require.LessOrEqual(t, len(got), 101, "catch_up claims at most the newest 100 missed slots")
	newest := got[len(got)-1]
	require.Equal(t, newest.Add(-99*time.Minute), got[len(got)-100], "the newest 100, each minute once")
	require.True(t, got[0].After(last.Add(199*time.Minute)), "slots older than the newest 100 stay missed: oldest claimed %s", got[0])
}

// TestCronRetriesATransientClaimFailureWithinItsTick: a claim that fails
// (here a real Postgres error, raised by a trigger while a flag is set) is
// retried while its tick's window lasts, and the tick becomes one run.
func TestCronRetriesATransientClaimFailureWithinItsTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, `
name: t
workflows:
  - name: every
    trigger: { cron: { schedule: "@every 30s" } }
    steps:
      - { id: ping, http_call: { url: "{{URL}}/every" } }
`)
	_, err := b.pool.Exec(ctx, `
		CREATE TABLE public.claim_fault (fail boolean NOT NULL);
		INSERT INTO public.claim_fault VALUES (true);
		CREATE SEQUENCE public.claim_attempts;
		CREATE FUNCTION public.refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM nextval('public.claim_attempts');
			IF (SELECT fail FROM public.claim_fault) THEN
				RAISE EXCEPTION 'transient claim failure (test)' USING ERRCODE = '40001';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_claims BEFORE INSERT ON rflow.workflow_runs FOR EACH ROW EXECUTE FUNCTION public.refuse_claims();`)
	require.NoError(t, err)
	// @every 30s ticks 30 s after boot: wait for the first attempts.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.engine.RunCron(cctx)
	attempts := func() int64 {
		var n int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.claim_attempts`).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return attempts() >= 3 }, 45*time.Second, 50*time.Millisecond, "the claim is retried")
	var runs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&runs))
	require.Zero(t, runs)
	failedAt := time.Now()
	_, err = b.pool.Exec(ctx, `UPDATE public.claim_fault SET fail = false`)
	require.NoError(t, err)

	var key string
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(ctx, `SELECT trigger_key FROM rflow.workflow_runs WHERE workflow_name = 'every'`).Scan(&key) == nil
	}, 10*time.Second, 50*time.Millisecond, "the tick is claimed once the failure passes")
	tick, err := time.Parse(time.RFC3339, key)
	require.NoError(t, err)
	require.True(t, tick.Before(failedAt), "the run is the tick whose claim failed (%s), not a later one", tick)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs`).Scan(&runs))
	require.Equal(t, 1, runs, "one run for the tick")
}
