// Package storetest gives each test its own freshly migrated Postgres
// database. It uses RFLOW_TEST_DATABASE_URL when set; otherwise it starts one
// private cluster per test binary (see store.StartLocal) and stops it when the
// tests finish. A package that uses it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
//
// Each database is a clone of a migrated template (CREATE DATABASE …
// TEMPLATE), so tests may run in parallel without seeing each other's rows.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/migrations"
	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
)

// EnvURL names the variable that points tests at an existing server. The URL's
// user must be allowed to create databases.
const EnvURL = "RFLOW_TEST_DATABASE_URL"

// The harness is per test binary by nature, so its state is package-level.
var (
	mu       sync.Mutex
	started  bool
	startErr error
	local    *store.LocalPostgres
	localDir string
	adminURL string
	template string
	// strategy makes clones copy files (Postgres 15+) instead of writing
	// the whole template through the WAL, several times faster here.
	strategy string
)

// Main runs the tests and then stops the private cluster, if one was started.
// The cluster also dies with the test binary if it crashes, because the
// server is started with a parent-death signal.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Shutdown stops the private cluster and removes its files. Main calls it.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if local != nil {
		_ = local.Stop(context.Background())
		_ = os.RemoveAll(localDir)
		local = nil
	}
}

// Server returns the harness's private cluster, or nil when tests use
// RFLOW_TEST_DATABASE_URL.
func Server(t testing.TB) *store.LocalPostgres {
	t.Helper()
	if err := setup(); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return local
}

// URL creates a fresh migrated database for this test and returns its URL.
// The database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	u, drop, err := Database(context.Background())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(drop)
	return u
}

// EmptyURL creates a fresh database that was never migrated (no rflow or
// river schema), for tests of what commands do before `rflow migrate`. The
// database is dropped when the test ends.
func EmptyURL(t testing.TB) string {
	t.Helper()
	if err := setup(); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	u, drop, err := newDatabase(context.Background(), "template0")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(drop)
	return u
}

// Database creates a fresh migrated database and returns its URL and a
// function that drops it: URL for code that has no *testing.T (runnable
// examples).
func Database(ctx context.Context) (string, func(), error) {
	if err := setup(); err != nil {
		return "", nil, err
	}
	return newDatabase(ctx, template+strategy)
}

// newDatabase creates a database cloned from template (which may carry a
// STRATEGY clause) and returns its URL and a function that drops it.
func newDatabase(ctx context.Context, template string) (string, func(), error) {
	name := "rflow_test_" + randomHex(6)
	if err := adminExec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, template)); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() {
		_ = adminExec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name))
	}
	return withDatabase(adminURL, name), drop, nil
}

// Pool creates a fresh migrated database for this test and returns a pool
// connected to it. The pool is closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, closeFn, err := Open(context.Background())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(closeFn)
	return pool
}

// Open creates a fresh migrated database and returns a pool connected to
// it, and a function that closes the pool and drops the database: Pool for
// code that has no *testing.T (runnable examples). The database's URL is
// pool.Config().ConnString().
func Open(ctx context.Context) (*pgxpool.Pool, func(), error) {
	u, drop, err := Database(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		drop()
		return nil, nil, err
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return pool, func() { pool.Close(); drop() }, nil
}

func setup() error {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return startErr
	}
	started = true
	startErr = start()
	return startErr
}

func start() error {
	ctx := context.Background()
	if u := os.Getenv(EnvURL); u != "" {
		adminURL = u
	} else {
		dir, err := os.MkdirTemp("", "rflow-pg-")
		if err != nil {
			return err
		}
		// The server may run as another user (when tests run as root).
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		localDir = dir
		local, err = store.StartLocal(ctx, store.LocalOptions{Dir: filepath.Join(dir, "cluster"), Ephemeral: true})
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		adminURL = local.URL("postgres")
	}
	return ensureTemplate(ctx)
}

// ensureTemplate creates (once per schema version) a migrated database that
// test databases are cloned from. Its name carries a hash of the migrations,
// so test binaries sharing an external server agree on it.
func ensureTemplate(ctx context.Context) error {
	template = "rflow_tpl_" + migrationsHash()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact.URL(adminURL), redact.Error(err))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('rflow.storetest.template'))`); err != nil {
		return err
	}
	defer conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('rflow.storetest.template'))`)
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return err
	}
	if version >= 150000 {
		strategy = " STRATEGY FILE_COPY"
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, template).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	building := template + "_build"
	_, _ = conn.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, building))
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, building)); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	pool, err := pgxpool.New(ctx, withDatabase(adminURL, building))
	if err != nil {
		return err
	}
	_, err = store.Migrate(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	// Rename only once fully migrated, so a crash mid-way never leaves a
	// half-built template behind under the real name.
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, building, template)); err != nil {
		return fmt.Errorf("publish template: %w", err)
	}
	return nil
}

func adminExec(ctx context.Context, sql string) error {
	var err error
	for range 20 {
		var conn *pgx.Conn
		conn, err = pgx.Connect(ctx, adminURL)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, sql)
		conn.Close(ctx)
		var pgErr *pgconn.PgError
		// 55006: the template is briefly in use by a concurrent clone.
		if errors.As(err, &pgErr) && pgErr.Code == "55006" {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return err
	}
	return err
}

func migrationsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func withDatabase(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// keyword/value form
		return strings.TrimSpace(raw) + " dbname=" + db
	}
	u.Path = "/" + db
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
