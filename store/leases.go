package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrLeaseLost means a lease is no longer held under the caller's token: it
// expired and another process took it, or it was released. The caller must
// roll back whatever it was fencing and stop the task.
var ErrLeaseLost = errors.New("lease lost")

// Lease is a held task lease. Token increases every time the lease changes
// hands; fenced writes compare it, so a stale holder's writes affect nothing.
type Lease struct {
	Name      string
	Owner     string
	Token     int64
	ExpiresAt time.Time
}

// AcquireLeases takes up to limit of the named leases that are free or
// expired (creating rows for names never seen), skipping rows another process
// is taking right now (FOR UPDATE SKIP LOCKED). Leases the owner already
// holds and that are still live are not returned; renew those with
// RenewLease. limit <= 0 means no limit.
func AcquireLeases(ctx context.Context, db DBTX, owner string, names []string, ttl time.Duration, limit int) ([]Lease, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO rflow.leases (name) SELECT unnest($1::text[])
		ON CONFLICT (name) DO NOTHING`, names); err != nil {
		return nil, fmt.Errorf("create leases: %w", err)
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := db.Query(ctx, `
		UPDATE rflow.leases l
		SET owner = $2, token = l.token + 1, expires_at = now() + $3::interval,
			acquired_at = now(), renewed_at = now()
		FROM (
			SELECT name FROM rflow.leases
			WHERE name = ANY($1::text[]) AND expires_at <= now()
			ORDER BY name
			LIMIT $4
			FOR UPDATE SKIP LOCKED
		) free
		WHERE l.name = free.name
		RETURNING l.name, l.owner, l.token, l.expires_at`,
		names, owner, ttl.String(), lim)
	if err != nil {
		return nil, fmt.Errorf("acquire leases for %s: %w", owner, err)
	}
	leases, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Lease])
	if err != nil {
		return nil, fmt.Errorf("acquire leases for %s: %w", owner, err)
	}
	return leases, nil
}

// RenewLease extends a held lease by ttl from now. It succeeds as long as
// nobody took the lease over since it was acquired (same token), even if it
// expired in between; otherwise it returns ErrLeaseLost.
func RenewLease(ctx context.Context, db DBTX, l Lease, ttl time.Duration) (Lease, error) {
	err := db.QueryRow(ctx, `
		UPDATE rflow.leases SET expires_at = now() + $3::interval, renewed_at = now()
		WHERE name = $1 AND token = $2
		RETURNING expires_at`, l.Name, l.Token, ttl.String()).Scan(&l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("renew %s: %w", l.Name, ErrLeaseLost)
	}
	if err != nil {
		return l, fmt.Errorf("renew %s: %w", l.Name, err)
	}
	return l, nil
}

// ReleaseLease gives a held lease up at once, so another process can take
// it without waiting for the TTL (graceful shutdown, rebalancing).
func ReleaseLease(ctx context.Context, db DBTX, l Lease) error {
	if _, err := db.Exec(ctx, `
		UPDATE rflow.leases SET owner = NULL, expires_at = '-infinity'
		WHERE name = $1 AND token = $2`, l.Name, l.Token); err != nil {
		return fmt.Errorf("release %s: %w", l.Name, err)
	}
	return nil
}

// FenceLease checks inside tx that l is still held and live, and share-locks
// the lease row so nobody can take it over before tx ends. Call it before
// any write the lease protects; on ErrLeaseLost roll tx back.
func FenceLease(ctx context.Context, tx pgx.Tx, l Lease) error {
	var one int
	err := tx.QueryRow(ctx, `
		SELECT 1 FROM rflow.leases
		WHERE name = $1 AND token = $2 AND expires_at > now()
		FOR SHARE`, l.Name, l.Token).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence %s token %d: %w", l.Name, l.Token, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("fence %s: %w", l.Name, err)
	}
	return nil
}

// LiveLeases counts the live leases whose name starts with prefix. Services
// hold one membership lease each under a common prefix, so this counts the
// live processes sharing the work.
func LiveLeases(ctx context.Context, db DBTX, prefix string) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `
		SELECT count(*) FROM rflow.leases
		WHERE starts_with(name, $1) AND expires_at > now()`, prefix).Scan(&n); err != nil {
		return 0, fmt.Errorf("count leases %s*: %w", prefix, err)
	}
	return n, nil
}
