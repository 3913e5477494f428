package store

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// rehearsalSchema is the form of a rehearsal's own River schema.
var rehearsalSchema = regexp.MustCompile(`^rehearsal_[0-9a-f]{32}$`)

// CreateRehearsalRiver creates River's tables in schema, a rehearsal's own
// (rehearsal_<32 hex>): its jobs live there, where no live process fetches,
// so a live executor can never pick up a rehearsal run. DropRehearsalRiver
// removes it.
func CreateRehearsalRiver(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if !rehearsalSchema.MatchString(schema) {
		return fmt.Errorf("rehearsal schema %q: want rehearsal_ and 32 hex digits", schema)
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations in %s: %w", schema, err)
	}
	return nil
}

// DropRehearsalRiver drops a rehearsal's River schema and every job in it.
func DropRehearsalRiver(ctx context.Context, db DBTX, schema string) error {
	if !rehearsalSchema.MatchString(schema) {
		return fmt.Errorf("rehearsal schema %q: want rehearsal_ and 32 hex digits", schema)
	}
	if _, err := db.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// testSessionLockClass is the advisory lock every running `rflow test`
// session holds shared for its whole life ("RFTS"): a sweep of test
// leftovers (PruneRehearsals without a session) takes it exclusively, so
// it never deletes the rows or the River schema of a session still
// running, and a session killed with -9 lets go of it with its
// connection.
const testSessionLockClass = 0x52465453

// HoldTestSession marks a test session as running until release is
// called (after the session has removed its rows and its River schema).
// It holds one pooled connection for that long.
func HoldTestSession(ctx context.Context, pool *pgxpool.Pool) (release func(), err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("test session lock: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1, 0)`, testSessionLockClass); err != nil {
		conn.Release()
		return nil, fmt.Errorf("test session lock: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock_shared($1, 0)`, testSessionLockClass); err != nil {
			// A session still holding the lock must not go back to the pool.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}

// sweepTests takes the test sessions' lock exclusively when no session is
// running, and returns the connection holding it (nil: sessions run).
func sweepTests(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, 0)`, testSessionLockClass).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, err
	}
	return conn, nil
}

// endSweep lets go of sweepTests' lock.
func endSweep(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, 0)`, testSessionLockClass); err != nil {
		_ = conn.Conn().Close(ctx)
	}
	conn.Release()
}

// dropRehearsalSchemas drops every rehearsal River schema; the caller holds
// the sweep lock, so none belongs to a running session.
func dropRehearsalSchemas(ctx context.Context, db DBTX) (int, error) {
	rows, err := db.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname ~ '^rehearsal_[0-9a-f]{32}$' ORDER BY nspname`)
	if err != nil {
		return 0, fmt.Errorf("list rehearsal schemas: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list rehearsal schemas: %w", err)
	}
	for i, n := range names {
		if err := DropRehearsalRiver(ctx, db, n); err != nil {
			return i, err
		}
	}
	return len(names), nil
}
