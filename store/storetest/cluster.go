package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/store"
)

// Cluster is a Postgres server private to one test, which the test may
// restart or take down without disturbing other tests' databases.
type Cluster struct {
	server *store.LocalPostgres
}

// NewCluster starts a private server for this test, with one migrated
// database, and stops it when the test ends. It needs the server binaries
// on the machine (see store.StartLocal): a test that must restart
// Postgres cannot run against RFLOW_TEST_DATABASE_URL, so it is skipped
// when no binaries are found.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	if _, err := store.FindPostgresBinDir(); err != nil {
		t.Skipf("storetest: %v", err)
	}
	dir, err := os.MkdirTemp("", "rflow-pgc-")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	// The server may run as another user (when tests run as root).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	ctx := context.Background()
	// Durable, unlike the shared cluster: an immediate shutdown must not
	// lose commits (synchronous_commit=off would).
	server, err := store.StartLocal(ctx, store.LocalOptions{Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("storetest: start private cluster: %v", err)
	}
	t.Cleanup(func() {
		_ = server.Stop(context.Background())
		_ = os.RemoveAll(dir)
	})
	c := &Cluster{server: server}
	conn, err := pgx.Connect(ctx, server.URL("postgres"))
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE rflow`); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	pool, err := pgxpool.New(ctx, c.URL())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool, nil); err != nil {
		t.Fatalf("storetest: migrate: %v", err)
	}
	return c
}

// URL is the migrated database's URL.
func (c *Cluster) URL() string { return c.server.URL("rflow") }

// Restart stops the server in mode, keeps it down for down and starts it
// again on the same port, failing the test if it cannot.
func (c *Cluster) Restart(t testing.TB, mode store.ShutdownMode, down time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), down+2*time.Minute)
	defer cancel()
	if err := c.server.Restart(ctx, mode, down); err != nil {
		t.Fatalf("storetest: restart postgres (%s): %v", mode, err)
	}
}
