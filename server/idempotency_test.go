package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
)

// expireLedger ages every ledger row past its expiry and, with cleanup, lets
// the cleanup job delete them: the two ways a record is gone.
func (b *testBundle) expireLedger(t *testing.T, cleanup bool) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `
		UPDATE rflow.idempotency_keys SET created_at = created_at - interval '30 days',
			expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	if !cleanup {
		return
	}
	w, err := jobs.NewLedgerCleanupWorker(jobs.LedgerCleanupConfig{Pool: b.pool})
	require.NoError(t, err)
	_, err = w.Cycle(b.ctx)
	require.NoError(t, err)
	require.Zero(t, b.ledger(t), "the cleanup job deleted the expired records")
}

func TestManualRunKeyUsedWithOtherInputConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "a",
		[]byte(`{"key": "order-7", "input": {"amount": 10, "to": "0xabc"}}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	runID := r.json(t)["run_id"].(string)

	// The same key and input under another Idempotency-Key (spacing and
	// field order aside): the recorded run.
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "b",
		[]byte(`{"input": {"to": "0xabc", "amount": 10}, "key": "order-7"}`))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, true, r.json(t)["duplicate"])
	require.Equal(t, runID, r.json(t)["run_id"])

	// Another input: a conflict that names the run holding the key.
	for _, body := range []string{`{"key": "order-7", "input": {"amount": 11, "to": "0xabc"}}`, `{"key": "order-7"}`} {
		r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", uuid.NewString(), []byte(body))
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", body, r.body)
		require.Equal(t, "run_key_reused", r.errorCode(t))
		msg := r.json(t)["error"].(map[string]any)["message"].(string)
		require.Contains(t, msg, runID)
		require.Contains(t, msg, "different input")
		require.Equal(t, runID, r.json(t)["error"].(map[string]any)["details"].(map[string]any)["run_id"])
	}
	require.Equal(t, 1, b.runs(t))
	require.Equal(t, 2, b.ledger(t), "conflicts record nothing")
}

func TestManualRunReplayAfterLedgerExpiry(t *testing.T) {
	t.Parallel()
	for _, cleanup := range []bool{false, true} {
		t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			body := []byte(`{"input": {"amount": 340282366920938463463374607431768211456}}`)
			r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-1", body)
			require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
			runID := r.json(t)["run_id"].(string)
			keyed := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-2", []byte(`{"key": "order-9", "input": 1}`))
			require.Equal(t, http.StatusCreated, keyed.status, "%s", keyed.body)

			b.expireLedger(t, cleanup)

			// An exact replay finds the run the command made.
			r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-1", body)
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			require.Equal(t, runID, r.json(t)["run_id"])
			require.Equal(t, true, r.json(t)["duplicate"])
			r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-2", []byte(`{"key": "order-9", "input": 1}`))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			require.Equal(t, keyed.json(t)["run_id"], r.json(t)["run_id"])
			require.Equal(t, 2, b.runs(t), "no duplicate run")

			// Changed input still conflicts.
			b.expireLedger(t, cleanup)
			r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-1", []byte(`{"input": {"amount": 1}}`))
			require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
			require.Contains(t, string(r.body), runID)
			r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "cmd-2", []byte(`{"key": "order-9", "input": 2}`))
			require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
			require.Equal(t, 2, b.runs(t))
		})
	}
}

func TestDeployReplayAfterLedgerExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	def := func(delay string) []byte {
		return []byte(fmt.Sprintf("name: manual\ntrigger:\n  manual: {}\nsteps:\n  - id: park\n    delay: %s\n", delay))
	}
	first := b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-2h", def("2h"))
	require.Equal(t, http.StatusOK, first.status, "%s", first.body)
	require.Equal(t, map[string]any{"name": "manual", "generation": float64(2), "changed": true, "previous_generation": float64(1)}, first.json(t))
	noop := b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-2h-again", def("2h"))
	require.Equal(t, http.StatusOK, noop.status, "%s", noop.body)
	require.Equal(t, false, noop.json(t)["changed"])
	r := b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-3h", def("3h"))
	require.Equal(t, float64(3), r.json(t)["generation"], "%s", r.body)

	b.expireLedger(t, true)

	// Exact replays answer what they did then, byte for byte, and roll
	// nothing back: generation 3 stays current.
	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-2h", def("2h"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, first.body, r.body)
	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-2h-again", def("2h"))
	require.Equal(t, noop.body, r.body)
	require.Equal(t, 3, b.count(t, `SELECT generation FROM rflow.workflows WHERE name = 'manual'`))

	// The key with another definition is still a conflict (the replays
	// above were recorded again: forget them too).
	b.expireLedger(t, true)
	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "deploy-2h", def("4h"))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "idempotency_key_reused", r.errorCode(t))
	require.Contains(t, string(r.body), "generation 2")
	require.Equal(t, 3, b.count(t, `SELECT generation FROM rflow.workflows WHERE name = 'manual'`))

	// A new key deploys (an explicit rollback is a new command).
	r = b.api(t, http.MethodPut, "/v1/workflows/manual", "rollback", def("2h"))
	require.Equal(t, map[string]any{"name": "manual", "generation": float64(4), "changed": true,
		"previous_generation": float64(3), "same_spec_as": float64(2)}, r.json(t))
}

func TestRepeatedCancelReturnsTheCancelledRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	id := r.json(t)["run_id"].(string)

	first := b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "cancel-1", nil)
	require.Equal(t, http.StatusOK, first.status, "%s", first.body)
	require.Equal(t, "cancelled", first.json(t)["run"].(map[string]any)["status"])

	second := b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "cancel-2", nil)
	require.Equal(t, http.StatusOK, second.status, "%s", second.body)
	require.Empty(t, second.header.Get(server.HeaderReplayed), "a new command, answered from the run")
	require.Equal(t, first.body, second.body, "the same run state, finished_at included")

	b.expireLedger(t, true)
	replay := b.api(t, http.MethodPost, "/v1/runs/"+id+"/cancel", "cancel-1", nil)
	require.Equal(t, http.StatusOK, replay.status, "%s", replay.body)
	require.Equal(t, first.body, replay.body, "after the ledger forgot it, the replay finds the cancelled run")

	// A run that finished otherwise is not cancelled after the fact.
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run-2", nil)
	done := r.json(t)["run_id"].(string)
	_, err := b.pool.Exec(b.ctx, `UPDATE rflow.workflow_runs SET status = 'completed', finished_at = now() WHERE id = $1`, done)
	require.NoError(t, err)
	r = b.api(t, http.MethodPost, "/v1/runs/"+done+"/cancel", "cancel-3", nil)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "invalid_state", r.errorCode(t))
}

func TestUUIDKeySpellingsReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := uuid.New()
	canonical := id.String()
	plain := strings.ReplaceAll(canonical, "-", "")
	spellings := []string{
		canonical, strings.ToUpper(canonical), "{" + canonical + "}", "{" + strings.ToUpper(canonical) + "}",
		plain, strings.ToUpper(plain), "urn:uuid:" + canonical, "URN:UUID:" + strings.ToUpper(canonical),
	}
	body := []byte(`{"input": 1}`)
	first := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", spellings[1], body)
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	for _, k := range spellings {
		r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", k, body)
		require.Equal(t, http.StatusCreated, r.status, "%s: %s", k, r.body)
		require.Equal(t, "true", r.header.Get(server.HeaderReplayed), k)
		require.Equal(t, first.body, r.body, k)
	}
	require.Equal(t, 1, b.runs(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM rflow.idempotency_keys WHERE key = $1`, canonical),
		"recorded under the canonical spelling")
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "{"+plain+"}", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Empty(t, r.header.Get(server.HeaderReplayed), "not a UUID spelling uuid.Parse accepts: a key of its own")

	// Keys that are not UUIDs stay byte-exact.
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "Order-1", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "order-1", body)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Empty(t, r.header.Get(server.HeaderReplayed))
	require.Equal(t, 4, b.runs(t))
}

// TestLegacyKeySpellingAnswers: a record written under a raw UUID spelling
// before keys were canonicalised still answers for that spelling.
func TestLegacyKeySpellingAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw := "{" + strings.ToUpper(uuid.NewString()) + "}"
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "seed", []byte(`{"input": 1}`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	// Re-key the record as an old release stored it: the raw spelling.
	_, err := b.pool.Exec(b.ctx, `UPDATE rflow.idempotency_keys SET key = $1 WHERE key = 'seed'`, raw)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE rflow.workflow_runs SET trigger_key = 'legacy-' || id`)
	require.NoError(t, err)

	again := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", raw, []byte(`{"input": 1}`))
	require.Equal(t, http.StatusCreated, again.status, "%s", again.body)
	require.Equal(t, "true", again.header.Get(server.HeaderReplayed))
	require.Equal(t, r.body, again.body)
	other := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", raw, []byte(`{"input": 2}`))
	require.Equal(t, http.StatusConflict, other.status, "%s", other.body)
	require.Equal(t, 1, b.runs(t))
}

func TestRetentionPerCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.ClientTTL = 2 * time.Hour; c.AutoTTL = 8 * 24 * time.Hour })
	expiry := func(key string) time.Duration {
		var d time.Duration
		require.NoError(t, b.pool.QueryRow(b.ctx, `
			SELECT expires_at - created_at FROM rflow.idempotency_keys WHERE key = $1`, key).Scan(&d))
		return d
	}
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "start", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, 2*time.Hour, expiry("start"))
	r = b.api(t, http.MethodPost, "/v1/runs/"+r.json(t)["run_id"].(string)+"/cancel", "cancel", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, 8*24*time.Hour, expiry("cancel"), "cancellation is a deterministic command")
}

func TestRetryReplayAfterLedgerExpiryDoesNotRetryAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run", nil)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	id := r.json(t)["run_id"].(string)
	fail := func() {
		t.Helper()
		_, err := b.pool.Exec(b.ctx, `
			UPDATE rflow.workflow_runs SET status = 'failed', failed_step = 'park', error = 'boom', finished_at = now()
			WHERE id = $1`, id)
		require.NoError(t, err)
		_, err = b.pool.Exec(b.ctx, `UPDATE rflow.step_runs SET status = 'failed', error = 'boom' WHERE run_id = $1`, id)
		require.NoError(t, err)
	}
	attempt := func(r reply) float64 {
		t.Helper()
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.json(t)["run"].(map[string]any)["attempt"].(float64)
	}
	fail()
	require.Equal(t, float64(2), attempt(b.api(t, http.MethodPost, "/v1/runs/"+id+"/retry", "retry-1", nil)))

	// The run fails again; a late replay of the first retry finds the run
	// it retried and leaves it alone.
	fail()
	b.expireLedger(t, true)
	replay := b.api(t, http.MethodPost, "/v1/runs/"+id+"/retry", "retry-1", nil)
	require.Equal(t, float64(2), attempt(replay), "not retried a second time")
	require.Equal(t, "failed", replay.json(t)["run"].(map[string]any)["status"])

	b.expireLedger(t, true)
	r = b.api(t, http.MethodPost, "/v1/runs/"+id+"/retry", "retry-1", []byte(`{"note": "other"}`))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "idempotency_key_reused", r.errorCode(t))

	// A new key is a new retry.
	require.Equal(t, float64(3), attempt(b.api(t, http.MethodPost, "/v1/runs/"+id+"/retry", "retry-2", nil)))
}
