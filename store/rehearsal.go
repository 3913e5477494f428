package store

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// liveName is the SQL condition that column holds a live workflow's name,
// not a replay's or a test's: namespaced names contain "__" (see package
// rehearsal), which a live name never does.
func liveName(column string) string { return "strpos(" + column + ", '__') = 0" }

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

// PurgeNamespace deletes every row journaled under the namespaced workflow
// name (runs and their steps, guard windows, budgets, the workflow and its
// generations), in one transaction. It refuses a live workflow's name, so
// it can never delete live history.
func PurgeNamespace(ctx context.Context, pool *pgxpool.Pool, name string) error {
	var live bool
	if err := pool.QueryRow(ctx, `SELECT `+liveName("$1::text"), name).Scan(&live); err != nil {
		return fmt.Errorf("purge %s: %w", name, err)
	}
	if live {
		return fmt.Errorf("purge %s: not a namespaced workflow; refusing to delete a live workflow's rows", name)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			// step_runs and run_retries go with their runs (ON DELETE CASCADE).
			`DELETE FROM rflow.workflow_runs WHERE workflow_name = $1`,
			`DELETE FROM rflow.rate_limit_buckets WHERE workflow = $1`,
			`DELETE FROM rflow.budget_reservations WHERE workflow_name = $1`,
			`DELETE FROM rflow.budgets WHERE workflow_name = $1`,
			// Generations and deploy records cascade.
			`DELETE FROM rflow.workflows WHERE name = $1`,
		} {
			if _, err := tx.Exec(ctx, q, name); err != nil {
				return fmt.Errorf("purge %s: %w", name, err)
			}
		}
		return nil
	})
}
