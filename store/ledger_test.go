package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

type ledgerBundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
}

func setupLedger(t *testing.T) *ledgerBundle {
	t.Helper()
	return &ledgerBundle{ctx: context.Background(), pool: storetest.Pool(t)}
}

// claim runs one ledger round trip in its own transaction: claim the key,
// and when owned, record response and commit (or roll back when fail).
func (b *ledgerBundle) claim(t *testing.T, c store.LedgerClaim, response string, fail bool) (*store.LedgerEntry, bool, error) {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	e, owned, err := store.ClaimIdempotencyKey(b.ctx, tx, c)
	if err != nil || !owned {
		return e, owned, err
	}
	if fail {
		return e, owned, nil // rolled back by the defer
	}
	require.NoError(t, store.CompleteIdempotencyKey(b.ctx, tx, c.Scope, c.Key, 201, []byte(response)))
	require.NoError(t, tx.Commit(b.ctx))
	return e, owned, nil
}

func TestLedgerReplayAndConflict(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	c := store.LedgerClaim{Scope: "v1", Key: "k1", RequestHash: "h1", TTL: time.Hour}

	_, owned, err := b.claim(t, c, `{"a":1}`, false)
	require.NoError(t, err)
	require.True(t, owned)

	e, owned, err := b.claim(t, c, `{"other":true}`, false)
	require.NoError(t, err)
	require.False(t, owned, "a recorded key must not be claimed again")
	require.Equal(t, 201, e.ResponseStatus)
	require.Equal(t, `{"a":1}`, string(e.Response), "the first response, byte for byte")

	other := c
	other.RequestHash = "h2"
	_, owned, err = b.claim(t, other, `{}`, false)
	require.ErrorIs(t, err, store.ErrKeyReused)
	require.False(t, owned)

	otherScope := c
	otherScope.Scope = "webhook:wf"
	_, owned, err = b.claim(t, otherScope, `{}`, false)
	require.NoError(t, err)
	require.True(t, owned, "scopes are separate key spaces")
}

func TestLedgerRollbackFreesKey(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	c := store.LedgerClaim{Scope: "v1", Key: "k", RequestHash: "h", TTL: time.Hour}

	_, owned, err := b.claim(t, c, "", true)
	require.NoError(t, err)
	require.True(t, owned)

	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM rflow.idempotency_keys`).Scan(&n))
	require.Zero(t, n, "a rolled-back command leaves no ledger row")

	_, owned, err = b.claim(t, c, "ok", false)
	require.NoError(t, err)
	require.True(t, owned)
}

func TestLedgerExpiredKeyIsReusable(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	// The TTL is long enough that the second claim, even on a loaded
	// machine, comes while the key is live.
	c := store.LedgerClaim{Scope: "v1", Key: "k", RequestHash: "h1", TTL: 2 * time.Second}
	_, owned, err := b.claim(t, c, "first", false)
	require.NoError(t, err)
	require.True(t, owned)

	c.RequestHash = "h2"
	_, _, err = b.claim(t, c, "second", false)
	require.ErrorIs(t, err, store.ErrKeyReused, "still live")

	time.Sleep(2100 * time.Millisecond)
	_, owned, err = b.claim(t, c, "second", false)
	require.NoError(t, err)
	require.True(t, owned, "an expired key is taken over, whatever its old request")

	c.TTL = time.Hour
	e, owned, err := b.claim(t, c, "third", false)
	require.NoError(t, err)
	require.False(t, owned)
	require.Equal(t, "second", string(e.Response))
}

func TestLedgerConcurrentClaimsOneOwner(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	_, err := b.pool.Exec(b.ctx, `CREATE TABLE mutations (n int)`)
	require.NoError(t, err)
	c := store.LedgerClaim{Scope: "v1", Key: "race", RequestHash: "h", TTL: time.Hour}

	const n = 30
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		owners    int
		responses []string
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			var resp string
			err := pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
				e, owned, err := store.ClaimIdempotencyKey(b.ctx, tx, c)
				if err != nil {
					return err
				}
				if !owned {
					resp = string(e.Response)
					return nil
				}
				if _, err := tx.Exec(b.ctx, `INSERT INTO mutations VALUES (1)`); err != nil {
					return err
				}
				time.Sleep(50 * time.Millisecond) // keep the others waiting on the key
				resp = "the one"
				mu.Lock()
				owners++
				mu.Unlock()
				return store.CompleteIdempotencyKey(b.ctx, tx, c.Scope, c.Key, 200, []byte(resp))
			})
			require.NoError(t, err)
			mu.Lock()
			responses = append(responses, resp)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()

	require.Equal(t, 1, owners)
	var mutations int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM mutations`).Scan(&mutations))
	require.Equal(t, 1, mutations)
	require.Len(t, responses, n)
	for _, r := range responses {
		require.Equal(t, "the one", r)
	}
}

func TestDeleteExpiredIdempotencyKeysBounded(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	_, err := b.pool.Exec(b.ctx, `
		INSERT INTO rflow.idempotency_keys (scope, key, request_hash, status, response_status, response, expires_at)
		SELECT 'v1', 'old' || i, 'h', 'completed', 200, '\x7b7d', now() - i * interval '1 minute'
		FROM generate_series(1, 25) i`)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `
		INSERT INTO rflow.idempotency_keys (scope, key, request_hash, status, response_status, response, expires_at)
		SELECT 'v1', 'live' || i, 'h', 'completed', 200, '\x7b7d', now() + interval '1 hour'
		FROM generate_series(1, 5) i`)
	require.NoError(t, err)

	// Another cleaner holds three expired rows: they are skipped, not waited on.
	locker, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer locker.Rollback(b.ctx)
	_, err = locker.Exec(b.ctx, `SELECT 1 FROM rflow.idempotency_keys WHERE key IN ('old1', 'old2', 'old3') FOR UPDATE`)
	require.NoError(t, err)

	var deleted []int64
	for range 4 {
		n, err := store.DeleteExpiredIdempotencyKeys(b.ctx, b.pool, 10)
		require.NoError(t, err)
		deleted = append(deleted, n)
	}
	require.Equal(t, []int64{10, 10, 2, 0}, deleted)
	require.NoError(t, locker.Rollback(b.ctx))

	n, err := store.DeleteExpiredIdempotencyKeys(b.ctx, b.pool, 10)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)

	var live int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM rflow.idempotency_keys`).Scan(&live))
	require.Equal(t, 5, live, "live entries are never deleted")

	_, err = store.DeleteExpiredIdempotencyKeys(b.ctx, b.pool, 0)
	require.Error(t, err)
}

func TestDeleteExpiredUsesExpiryIndex(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	_, err := b.pool.Exec(b.ctx, `
		INSERT INTO rflow.idempotency_keys (scope, key, request_hash, status, response_status, response, expires_at)
		SELECT 'v1', 'k' || i, 'h', 'completed', 200, '\x7b7d', now() + i * interval '1 second'
		FROM generate_series(1, 2000) i`)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `ANALYZE rflow.idempotency_keys`)
	require.NoError(t, err)
	var plan []string
	rows, err := b.pool.Query(b.ctx, `EXPLAIN
		SELECT scope, key FROM rflow.idempotency_keys WHERE expires_at <= now() ORDER BY expires_at LIMIT 100
		FOR UPDATE SKIP LOCKED`)
	require.NoError(t, err)
	plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(plan), "idempotency_keys_expires", "cleanup must walk the expiry index")
}

// TestLedgerClaimRacesCleanup: a claim of an expired key that the cleanup
// is deleting at that moment waits for it and then owns a fresh entry.
func TestLedgerClaimRacesCleanup(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	c := store.LedgerClaim{Scope: "v1", Key: "k", RequestHash: "h", TTL: 100 * time.Millisecond}
	_, owned, err := b.claim(t, c, "old", false)
	require.NoError(t, err)
	require.True(t, owned)
	time.Sleep(200 * time.Millisecond)

	cleaner, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer cleaner.Rollback(b.ctx)
	n, err := store.DeleteExpiredIdempotencyKeys(b.ctx, cleaner, 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	type result struct {
		entry *store.LedgerEntry
		owned bool
		err   error
	}
	done := make(chan result, 1)
	c.TTL = time.Hour
	c.RequestHash = "h2"
	go func() {
		e, owned, err := b.claim(t, c, "new", false)
		done <- result{e, owned, err}
	}()
	select {
	case <-done:
		t.Fatal("the claim must wait for the cleaner's delete")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, cleaner.Commit(b.ctx))
	res := <-done
	require.NoError(t, res.err)
	require.True(t, res.owned)

	e, owned, err := b.claim(t, c, "newer", false)
	require.NoError(t, err)
	require.False(t, owned)
	require.Equal(t, "new", string(e.Response))
}
