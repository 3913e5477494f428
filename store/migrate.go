package store

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/rflow-dev/rflow/migrations"
)

// RiverSchema is the schema holding River's tables.
const RiverSchema = "river"

// migrateLockKey serialises migrations across processes.
const migrateLockKey = "rflow.migrate"

// Migration is one of rflow's SQL migrations and whether it is applied.
type Migration struct {
	Version   int
	Name      string
	AppliedAt *time.Time
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	RiverApplied []int
	Applied      []Migration
}

// Migrate brings the database up to date: River's migrations into schema
// river, then rflow's own from package migrations. It holds an advisory lock
// for the whole run, so concurrent callers serialise and the second finds
// nothing to do. Running it again is a no-op.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (*MigrateResult, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, migrateLockKey); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, migrateLockKey)
	}()

	res := &MigrateResult{}
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+RiverSchema); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", RiverSchema, err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: RiverSchema, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	rres, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	for _, v := range rres.Versions {
		res.RiverApplied = append(res.RiverApplied, v.Version)
	}

	if err := ensureMigrationsTable(ctx, conn.Conn()); err != nil {
		return nil, err
	}
	state, err := migrationState(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	files, err := migrationFiles()
	if err != nil {
		return nil, err
	}
	for _, m := range files {
		if _, done := state[m.Version]; done {
			continue
		}
		body, err := fs.ReadFile(migrations.FS, m.file)
		if err != nil {
			return nil, err
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO rflow.schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", m.file, err)
		}
		logger.Info("applied migration", "version", m.Version, "name", m.Name)
		res.Applied = append(res.Applied, Migration{Version: m.Version, Name: m.Name})
	}
	return res, nil
}

// MigrationStatus lists rflow's migrations and when each was applied, plus
// whether River's schema is current.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool) (migs []Migration, riverPending []int, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('rflow.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, nil, err
	}
	state := map[int]time.Time{}
	if exists {
		if state, err = migrationState(ctx, conn.Conn()); err != nil {
			return nil, nil, err
		}
	}
	files, err := migrationFiles()
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		m := Migration{Version: f.Version, Name: f.Name}
		if at, ok := state[f.Version]; ok {
			m.AppliedAt = &at
		}
		migs = append(migs, m)
	}
	var riverExists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('river.river_migration') IS NOT NULL`).Scan(&riverExists); err != nil {
		return nil, nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: RiverSchema})
	if err != nil {
		return nil, nil, err
	}
	all := migrator.AllVersions()
	applied := map[int]bool{}
	if riverExists {
		existing, err := migrator.ExistingVersions(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("river migration state: %w", err)
		}
		for _, v := range existing {
			applied[v.Version] = true
		}
	}
	for _, v := range all {
		if !applied[v.Version] {
			riverPending = append(riverPending, v.Version)
		}
	}
	return migs, riverPending, nil
}

func ensureMigrationsTable(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `
		CREATE SCHEMA IF NOT EXISTS rflow;
		CREATE TABLE IF NOT EXISTS rflow.schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`)
	if err != nil {
		return fmt.Errorf("create rflow.schema_migrations: %w", err)
	}
	return nil
}

func migrationState(ctx context.Context, conn *pgx.Conn) (map[int]time.Time, error) {
	rows, err := conn.Query(ctx, `SELECT version, applied_at FROM rflow.schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read rflow.schema_migrations: %w", err)
	}
	state := map[int]time.Time{}
	var v int
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&v, &at}, func() error {
		state[v] = at
		return nil
	})
	return state, err
}

type migrationFile struct {
	Version int
	Name    string
	file    string
}

func migrationFiles() ([]migrationFile, error) {
	entries, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []migrationFile
	seen := map[int]string{}
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: want NNN_name.sql", e)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, e, v)
		}
		seen[v] = e
		out = append(out, migrationFile{Version: v, Name: name, file: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
