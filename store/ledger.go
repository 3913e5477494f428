package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Idempotency ledger entry statuses. A pending entry is only ever visible to
// the transaction that claimed it: the claim, the mutation and the recorded
// response commit together.
const (
	LedgerPending   = "pending"
	LedgerCompleted = "completed"
)

// ErrKeyReused is returned by ClaimIdempotencyKey when a live key was first
// used for a different request (a different request hash).
var ErrKeyReused = errors.New("idempotency key already used for a different request")

// CanonicalIdempotencyKey is the ledger form of a client's key: a key that
// parses as a UUID (any case, with braces, without dashes, with a urn:uuid:
// prefix) becomes its lower-case dashed form, so every spelling of one UUID
// is one key; any other key stays byte for byte.
func CanonicalIdempotencyKey(key string) string {
	if id, err := uuid.Parse(key); err == nil {
		return id.String()
	}
	return key
}

// LedgerClaim asks to own one idempotency key for one request.
type LedgerClaim struct {
	// Scope separates key spaces: the same key in two scopes is two entries.
	Scope string
	Key   string
	// Spelling is the key as the client sent it, when Key is its canonical
	// form (CanonicalIdempotencyKey). A live entry recorded under exactly
	// that spelling before keys were canonicalised answers for it, so an
	// upgrade never lets a retry act twice.
	Spelling string
	// RequestHash identifies the request the key was first used for; a
	// later request with the same key and another hash is refused.
	RequestHash string
	// LegacyHash, when set, is the same request's hash as an older
	// version of rflow computed it: a live entry recorded with it is the
	// same request, so an upgrade never turns a retry into a 409.
	LegacyHash string
	// TTL is how long the recorded response stays replayable.
	TTL time.Duration
}

// LedgerEntry is a recorded command: the response first sent for a key.
type LedgerEntry struct {
	Scope          string
	Key            string
	RequestHash    string
	Status         string
	ResponseStatus int
	Response       []byte
	ExpiresAt      time.Time
	CreatedAt      time.Time
}

// ClaimIdempotencyKey is the ledger's gate, insert first: it inserts a
// pending entry for c in tx, or takes over an expired one. owned=true means
// the caller holds the key: it performs its mutation in the same tx, records
// the response with CompleteIdempotencyKey and commits all three together
// (a rollback frees the key). A concurrent claim of the same key blocks on
// the unique index until that transaction ends, then sees its outcome.
//
// owned=false returns the live recorded entry: the caller replies with its
// response and mutates nothing. A live entry with another request hash is
// ErrKeyReused.
func ClaimIdempotencyKey(ctx context.Context, tx pgx.Tx, c LedgerClaim) (entry *LedgerEntry, owned bool, err error) {
	if c.TTL <= 0 {
		return nil, false, fmt.Errorf("idempotency key %s/%s: ttl must be positive, got %s", c.Scope, c.Key, c.TTL)
	}
	if c.Spelling != "" && c.Spelling != c.Key {
		legacy, err := liveEntry(ctx, tx, c.Scope, c.Spelling)
		if err != nil {
			return nil, false, err
		}
		if legacy != nil {
			return legacy, false, matchRequest(legacy, c)
		}
	}
	// The expired row may vanish (cleanup) between the two statements; a
	// second round then inserts afresh.
	for range 3 {
		e := LedgerEntry{Scope: c.Scope, Key: c.Key, RequestHash: c.RequestHash, Status: LedgerPending}
		err = tx.QueryRow(ctx, `
			INSERT INTO rflow.idempotency_keys AS k (scope, key, request_hash, status, expires_at)
			VALUES ($1, $2, $3, 'pending', now() + $4::interval)
			ON CONFLICT (scope, key) DO UPDATE
				SET request_hash = EXCLUDED.request_hash, status = 'pending', response_status = NULL,
					response = NULL, expires_at = EXCLUDED.expires_at, created_at = now()
				WHERE k.expires_at <= now()
			RETURNING expires_at, created_at`,
			c.Scope, c.Key, c.RequestHash, c.TTL).Scan(&e.ExpiresAt, &e.CreatedAt)
		if err == nil {
			return &e, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("claim idempotency key %s/%s: %w", c.Scope, c.Key, err)
		}
		// A live entry exists (and is committed: the insert waited for it).
		live, err := liveEntry(ctx, tx, c.Scope, c.Key)
		if err != nil {
			return nil, false, err
		}
		if live == nil {
			continue
		}
		return live, false, matchRequest(live, c)
	}
	return nil, false, fmt.Errorf("claim idempotency key %s/%s: entry kept expiring under the claim", c.Scope, c.Key)
}

// liveEntry loads the live completed entry of (scope, key), or nil.
func liveEntry(ctx context.Context, tx pgx.Tx, scope, key string) (*LedgerEntry, error) {
	e := LedgerEntry{Scope: scope, Key: key}
	err := tx.QueryRow(ctx, `
		SELECT request_hash, status, response_status, response, expires_at, created_at
		FROM rflow.idempotency_keys WHERE scope = $1 AND key = $2 AND expires_at > now()`,
		scope, key).Scan(&e.RequestHash, &e.Status, &e.ResponseStatus, &e.Response, &e.ExpiresAt, &e.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load idempotency key %s/%s: %w", scope, key, err)
	}
	if e.Status != LedgerCompleted {
		return nil, fmt.Errorf("idempotency key %s/%s is %s outside its transaction", scope, key, e.Status)
	}
	return &e, nil
}

// matchRequest is nil when the recorded entry e is for the request of c.
func matchRequest(e *LedgerEntry, c LedgerClaim) error {
	if e.RequestHash != c.RequestHash && (c.LegacyHash == "" || e.RequestHash != c.LegacyHash) {
		return fmt.Errorf("idempotency key %s/%s: %w", c.Scope, e.Key, ErrKeyReused)
	}
	return nil
}

// CompleteIdempotencyKey records the response of a key claimed in tx. The
// response bytes are what a replay sends back, byte for byte.
func CompleteIdempotencyKey(ctx context.Context, tx pgx.Tx, scope, key string, status int, response []byte) error {
	tag, err := tx.Exec(ctx, `
		UPDATE rflow.idempotency_keys SET status = 'completed', response_status = $3, response = $4
		WHERE scope = $1 AND key = $2 AND status = 'pending'`, scope, key, status, response)
	if err != nil {
		return fmt.Errorf("record idempotency key %s/%s: %w", scope, key, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("record idempotency key %s/%s: not claimed in this transaction", scope, key)
	}
	return nil
}

// DeleteExpiredIdempotencyKeys deletes at most limit expired entries,
// oldest first, through the expiry index. Rows locked by another cleaner are
// skipped (FOR UPDATE SKIP LOCKED), so concurrent cleaners never wait on
// each other. It returns how many rows it deleted; fewer than limit means
// the backlog is drained (or the rest is locked by another cleaner).
func DeleteExpiredIdempotencyKeys(ctx context.Context, db DBTX, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("delete expired idempotency keys: limit must be positive, got %d", limit)
	}
	tag, err := db.Exec(ctx, `
		DELETE FROM rflow.idempotency_keys
		WHERE (scope, key) IN (
			SELECT scope, key FROM rflow.idempotency_keys
			WHERE expires_at <= now()
			ORDER BY expires_at
			LIMIT $1
			FOR UPDATE SKIP LOCKED)`, limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
