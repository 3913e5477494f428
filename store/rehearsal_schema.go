package store

import (
	"context"
	"fmt"
	"regexp"

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
