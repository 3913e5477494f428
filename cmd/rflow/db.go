package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
)

// database is an open connection pool plus whatever must be stopped with it
// (the embedded Postgres, when no URL was given).
type database struct {
	Pool     *pgxpool.Pool
	URL      string
	Embedded *store.LocalPostgres
}

func (d *database) Close() {
	d.Pool.Close()
	if d.Embedded != nil {
		_ = d.Embedded.Stop(context.Background())
	}
}

// openDatabase connects to --database-url, or starts the embedded Postgres
// for project when none is given, creating it on first use. It does not
// migrate.
func openDatabase(c *cli.Context, project string, logger *slog.Logger) (*database, error) {
	return openEmbedded(c, project, logger, false)
}

// openMigrated is openDatabase followed by the migrations, for commands
// that write their own rows (replays and tests) without a running start.
func openMigrated(c *cli.Context, project string, logger *slog.Logger) (*database, error) {
	db, err := openDatabase(c, project, logger)
	if err != nil {
		return nil, err
	}
	if _, err := store.Migrate(c.Context, db.Pool, nil); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openExisting is openDatabase for commands that read or change what is
// already there: it never creates an embedded cluster.
func openExisting(c *cli.Context, project string, logger *slog.Logger) (*database, error) {
	return openEmbedded(c, project, logger, true)
}

func openEmbedded(c *cli.Context, project string, logger *slog.Logger, mustExist bool) (*database, error) {
	db := &database{URL: c.String("database-url")}
	if db.URL == "" {
		dir, err := embeddedDataDir(project)
		if err != nil {
			return nil, err
		}
		lp, err := store.StartLocal(c.Context, store.LocalOptions{Dir: dir, Logger: logger, MustExist: mustExist})
		if errors.Is(err, store.ErrNoLocalCluster) {
			return nil, cli.Exit(fmt.Sprintf("there is no local database for project %s yet (nothing in %s): "+
				"`rflow start` or `rflow migrate` creates it, or pass --database-url / DATABASE_URL", project, dir), exitFailure)
		}
		if err != nil {
			return nil, fmt.Errorf("embedded postgres: %w", err)
		}
		db.Embedded = lp
		db.URL = lp.URL("postgres")
	}
	pool, err := connect(c.Context, db.URL, c.Int("workers"))
	if err != nil {
		if db.Embedded != nil {
			_ = db.Embedded.Stop(context.Background())
		}
		return nil, err
	}
	db.Pool = pool
	return db, nil
}

// connect opens a pool and proves the server answers, so an unreachable
// database is one clear line rather than a failure later on. A process
// that works steps (workers > 0) gets a pool sized for them unless the URL
// sets pool_max_conns: pgx's default, four connections on a small
// machine, had 50 workers, River and the triggers queueing for them.
func connect(ctx context.Context, url string, workers int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL is not valid: %s", cleanPgError(err))
	}
	if workers > 0 && !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, poolSize(workers))
	}
	cfg.ConnConfig.ConnectTimeout = 5e9
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %s", cleanPgError(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database at %s: %s (check --database-url / DATABASE_URL and that the server is running)",
			cfg.ConnConfig.Host, cleanPgError(err))
	}
	return pool, nil
}

// poolSize is the connections a process with workers step workers opens
// at most: a worker holds one only around its step's reads and outcome,
// not during the effect, so a quarter of them plus River's and the
// triggers' own; four processes at the default 50 workers stay within
// Postgres's default max_connections of 100.
func poolSize(workers int) int32 {
	return int32(workers/4 + 8)
}

// undefinedTable is SQLSTATE 42P01, undefined_table.
const undefinedTable = "42P01"

// noSchema explains an error from a database rflow never migrated: a read
// command finds no rflow (or river) tables there.
func noSchema(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
		return errors.New("the database has no rflow schema yet: run `rflow migrate` or `rflow start` first")
	}
	return err
}

// cleanPgError keeps the last, most specific part of a pgconn error and
// never includes the password.
func cleanPgError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && errors.Unwrap(err) != nil {
		msg = msg[i+2:]
	}
	return redact.Text(msg)
}

// embeddedDataDir is where the embedded Postgres keeps its data for project:
// $XDG_DATA_HOME/rflow/<project>, else ~/.local/share/rflow/<project>. As root
// without XDG_DATA_HOME it is /var/lib/rflow/<project>, because the server
// runs as an unprivileged user that cannot enter /root.
func embeddedDataDir(project string) (string, error) {
	if project == "" {
		project = "default"
	}
	home, err := rflowDataHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, project), nil
}

// rflowDataHome is the folder of every project's embedded database
// ($XDG_DATA_HOME/rflow, …; see embeddedDataDir), created if need be.
func rflowDataHome() (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	switch {
	case base != "":
	case os.Geteuid() == 0:
		base = "/var/lib"
	default:
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find a data directory: %w (set XDG_DATA_HOME or DATABASE_URL)", err)
		}
		base = filepath.Join(home, ".local", "share")
	}
	dir := filepath.Join(base, "rflow")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create data directory: %w", err)
	}
	return dir, nil
}
