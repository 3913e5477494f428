package store_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// A second StartLocal on a cluster another LocalPostgres runs attaches to
// that server (same port and postmaster, queries answer) instead of failing
// with "lock file postmaster.pid already exists"; stopping the attached one
// leaves the server up, stopping the owner stops it.
func TestStartLocalAttachesToTheRunningServer(t *testing.T) {
	if _, err := store.FindPostgresBinDir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(publicDir(t), "cluster")
	owner, err := store.StartLocal(ctx, store.LocalOptions{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = owner.Stop(context.Background()) })
	require.False(t, owner.Attached())

	other, err := store.StartLocal(ctx, store.LocalOptions{Dir: dir})
	require.NoError(t, err, "a second StartLocal on a running cluster")
	require.True(t, other.Attached())
	require.Equal(t, owner.Port(), other.Port())
	require.Equal(t, owner.Pid(), other.Pid())
	require.Equal(t, owner.URL("postgres"), other.URL("postgres"))
	conn, err := pgx.Connect(ctx, other.URL("postgres"))
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(ctx, `SELECT 1`).Scan(&one))
	conn.Close(ctx)

	require.NoError(t, other.Stop(ctx))
	conn, err = pgx.Connect(ctx, owner.URL("postgres"))
	require.NoError(t, err, "stopping the attached handle stopped the owner's server")
	conn.Close(ctx)

	require.NoError(t, owner.Stop(ctx))
	require.NoFileExists(t, filepath.Join(owner.DataDir(), "postmaster.pid"))

	// Stopped: the next StartLocal owns a server of its own again.
	again, err := store.StartLocal(ctx, store.LocalOptions{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	defer again.Stop(ctx)
	require.False(t, again.Attached())
}

// A postmaster.pid left by a server that is gone (a dead pid) is no reason
// to attach: StartLocal starts the server.
func TestStartLocalIgnoresAStalePidFile(t *testing.T) {
	if _, err := store.FindPostgresBinDir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(publicDir(t), "cluster")
	lp, err := store.StartLocal(ctx, store.LocalOptions{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	require.NoError(t, lp.Stop(ctx))
	// A pid that is surely not running (above the kernel's pid_max default).
	stale := "4194305\n" + lp.DataDir() + "\n1700000000\n" + "1\n\n127.0.0.1\n  0 0\nready   \n"
	pidFile := filepath.Join(lp.DataDir(), "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(stale), 0o600))
	fi, err := os.Stat(lp.DataDir())
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t) // as root, the server runs as another user
	require.NoError(t, os.Chown(pidFile, int(st.Uid), int(st.Gid)))

	lp, err = store.StartLocal(ctx, store.LocalOptions{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	defer lp.Stop(ctx)
	require.False(t, lp.Attached())
	require.NotEqual(t, 1, lp.Port())
}

// publicDir is a fresh directory the server's user can enter when the
// tests run as root (t.TempDir's parents are 0700).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rflow-localpg-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o777))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
