package store_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/migrations"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestCanonicalIdempotencyKey(t *testing.T) {
	t.Parallel()
	const c = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	for _, k := range []string{c, strings.ToUpper(c), "{" + c + "}", "{6BA7B810-9DAD-11D1-80B4-00C04FD430C8}",
		"6ba7b8109dad11d180b400c04fd430c8", "6BA7B8109DAD11D180B400C04FD430C8", "urn:uuid:" + c,
		"URN:UUID:6BA7B810-9DAD-11D1-80B4-00C04FD430C8"} {
		require.Equal(t, c, store.CanonicalIdempotencyKey(k), k)
	}
	for _, k := range []string{"Order-1", "order-1", " " + c, c + " ", "{6ba7b8109dad11d180b400c04fd430c8}", "urn:uuid:{" + c + "}", ""} {
		require.Equal(t, k, store.CanonicalIdempotencyKey(k), "not a UUID: byte-exact %q", k)
	}
}

func TestLedgerLegacySpellingAnswersForItself(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	raw := "{" + strings.ToUpper(uuid.NewString()) + "}"
	// A record an earlier release wrote under the raw spelling.
	_, owned, err := b.claim(t, store.LedgerClaim{Scope: "v1", Key: raw, RequestHash: "h", TTL: time.Hour}, "legacy", false)
	require.NoError(t, err)
	require.True(t, owned)

	c := store.LedgerClaim{Scope: "v1", Key: store.CanonicalIdempotencyKey(raw), Spelling: raw, RequestHash: "h", TTL: time.Hour}
	e, owned, err := b.claim(t, c, "new", false)
	require.NoError(t, err)
	require.False(t, owned, "the legacy record answers: no second mutation")
	require.Equal(t, "legacy", string(e.Response))

	c.RequestHash = "other"
	_, _, err = b.claim(t, c, "new", false)
	require.ErrorIs(t, err, store.ErrKeyReused)

	// Once it expires the canonical key takes over.
	_, err = b.pool.Exec(b.ctx, `UPDATE rflow.idempotency_keys SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	_, owned, err = b.claim(t, c, "canonical", false)
	require.NoError(t, err)
	require.True(t, owned)
}

// TestMigrationCanonicalisesUUIDKeys runs the key rewrite of migration 009
// again over records as an earlier release stored them.
func TestMigrationCanonicalisesUUIDKeys(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	src, err := fs.ReadFile(migrations.FS, "009_command_identity.sql")
	require.NoError(t, err)
	rewrite := string(src[strings.Index(string(src), "WITH spelled AS"):])

	one, two, three := uuid.NewString(), uuid.NewString(), uuid.NewString()
	insert := func(scope, key string, age time.Duration) {
		_, err := b.pool.Exec(b.ctx, `
			INSERT INTO rflow.idempotency_keys (scope, key, request_hash, status, response_status, response, expires_at, created_at)
			VALUES ($1, $2, $2, 'completed', 201, '{}', now() + interval '1 hour', now() - $3::interval)`, scope, key, age)
		require.NoError(t, err)
	}
	insert("v1", strings.ToUpper(one), 0)
	insert("v1", "urn:uuid:"+strings.ReplaceAll(two, "-", ""), 0) // not a spelling Go accepts: stays
	insert("v1", "{"+two+"}", 2*time.Minute)                      // the older of two spellings moves
	insert("v1", strings.ReplaceAll(strings.ToUpper(two), "-", ""), time.Minute)
	insert("v1", three, 0)                  // already canonical
	insert("v1", strings.ToUpper(three), 0) // collides with it: stays
	insert("webhook:wf", strings.ToUpper(one), 0)
	insert("v1", "Order-1", 0)

	_, err = b.pool.Exec(b.ctx, rewrite)
	require.NoError(t, err)
	rows, err := b.pool.Query(b.ctx, `SELECT scope || ' ' || key || ' ' || request_hash FROM rflow.idempotency_keys ORDER BY 1`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	want := []string{
		"v1 " + one + " " + strings.ToUpper(one),
		"v1 " + two + " {" + two + "}",
		"v1 " + strings.ReplaceAll(strings.ToUpper(two), "-", "") + " " + strings.ReplaceAll(strings.ToUpper(two), "-", ""),
		"v1 " + three + " " + three,
		"v1 " + strings.ToUpper(three) + " " + strings.ToUpper(three),
		"v1 urn:uuid:" + strings.ReplaceAll(two, "-", "") + " urn:uuid:" + strings.ReplaceAll(two, "-", ""),
		"v1 Order-1 Order-1",
		"webhook:wf " + strings.ToUpper(one) + " " + strings.ToUpper(one),
	}
	require.ElementsMatch(t, want, got)
}

func TestRunByKeyComparesInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec) VALUES ('wf', 'h', '{}')`)
	require.NoError(t, err)
	first := store.ManualClaim("wf", "k", json.RawMessage(`{"a": 1, "b": [1, 2]}`))
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.ClaimRuns(ctx, tx, []store.Claim{first, store.ManualClaim("wf", "none", nil)})
		return err
	}))
	for _, c := range []struct {
		key, input string
		same       bool
	}{
		{"k", `{"b":[1,2],"a":1}`, true},
		{"k", `{"a": 1.0, "b": [1, 2]}`, true},
		{"k", `{"a": 1, "b": [2, 1]}`, false},
		{"k", ``, false},
		{"none", ``, true},
		{"none", `null`, true},
		{"none", `{}`, false},
	} {
		id, same, err := store.RunByKey(ctx, pool, "wf", c.key, store.ManualClaim("wf", c.key, json.RawMessage(c.input)).Trigger)
		require.NoError(t, err)
		require.NotEqual(t, uuid.Nil, id)
		require.Equal(t, c.same, same, "%s %s", c.key, c.input)
	}
	_, _, err = store.RunByKey(ctx, pool, "wf", "missing", nil)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestDeployCommandRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := store.DeployByCommand(ctx, pool, "wf", "k")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d, err := store.DeployWorkflow(ctx, tx, "wf", "h1", []byte(`{}`))
		if err != nil {
			return err
		}
		return store.RecordDeployCommand(ctx, tx, store.DeployCommand{Workflow: "wf", Key: "k", RequestHash: "r1", Deployed: d})
	}))
	got, err := store.DeployByCommand(ctx, pool, "wf", "k")
	require.NoError(t, err)
	require.Equal(t, &store.DeployCommand{Workflow: "wf", Key: "k", RequestHash: "r1",
		Deployed: store.Deployed{Name: "wf", Generation: 1, Changed: true}}, got)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return store.RecordDeployCommand(ctx, tx, store.DeployCommand{Workflow: "wf", Key: "k", RequestHash: "r2", Deployed: got.Deployed})
	})
	require.Error(t, err, "one record per key and workflow")
}

func TestRetryCommandRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec) VALUES ('wf', 'h', '{}')`)
	require.NoError(t, err)
	var won []store.ClaimedRun
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		won, err = store.ClaimRuns(ctx, tx, []store.Claim{store.ManualClaim("wf", "k", nil)})
		return err
	}))
	id := won[0].ID
	_, err = store.RetryByCommand(ctx, pool, id, "r")
	require.ErrorIs(t, err, store.ErrNotFound)
	rec := store.RetryCommand{RunID: id, Key: "r", RequestHash: "h1", Attempt: 2}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.RecordRetryCommand(ctx, tx, rec) }))
	got, err := store.RetryByCommand(ctx, pool, id, "r")
	require.NoError(t, err)
	require.Equal(t, &rec, got)
	require.Error(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.RecordRetryCommand(ctx, tx, rec) }),
		"one record per key and run")
}
