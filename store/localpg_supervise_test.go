package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// A postmaster killed with SIGKILL is started again by Supervise on the same
// port and data (a row written before is there after); one event per state
// change. When the data directory no longer starts, Supervise gives up after
// its attempts with ErrLocalGone and the reason.
func TestSuperviseRestartsAKilledServer(t *testing.T) {
	if _, err := store.FindPostgresBinDir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx := context.Background()
	// Durable, as rflow dev runs it: an ephemeral cluster may lose the
	// last commits to a kill.
	lp, err := store.StartLocal(ctx, store.LocalOptions{Dir: filepath.Join(publicDir(t), "cluster")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lp.Stop(context.Background()) })
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, lp.URL("postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	require.NoError(t, exec(`CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)`))

	var mu sync.Mutex
	var events []store.LocalEvent
	done := make(chan error, 1)
	go func() {
		done <- lp.Supervise(ctx, store.SuperviseOptions{Attempts: 3, Backoff: 50 * time.Millisecond, OnEvent: func(e store.LocalEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}})
	}()
	states := func() []store.LocalState {
		mu.Lock()
		defer mu.Unlock()
		var out []store.LocalState
		for _, e := range events {
			out = append(out, e.State)
		}
		return out
	}

	first := lp.Pid()
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	require.Eventually(t, func() bool { return len(states()) == 3 }, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, []store.LocalState{store.LocalDown, store.LocalRestarting, store.LocalBack}, states())
	require.NotEqual(t, first, lp.Pid())
	require.NoError(t, exec(`INSERT INTO kept SELECT x + 1 FROM kept`), "the restarted server has the data")

	// Unusable: the configuration no longer parses, so every start fails.
	conf := filepath.Join(lp.DataDir(), "postgresql.conf")
	require.NoError(t, os.WriteFile(conf, []byte("this is = = not a config\n"), 0o600))
	require.NoError(t, syscall.Kill(lp.Pid(), syscall.SIGKILL))
	var gone error
	select {
	case gone = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("Supervise did not give up; events %v", states())
	}
	require.True(t, errors.Is(gone, store.ErrLocalGone), "got %v", gone)
	require.Contains(t, gone.Error(), "after 3 restarts")
	require.Equal(t, []store.LocalState{store.LocalDown, store.LocalRestarting, store.LocalBack,
		store.LocalDown, store.LocalRestarting, store.LocalRestarting, store.LocalRestarting}, states())
}

// Stop is not an outage: Supervise returns nil and restarts nothing.
func TestSuperviseEndsOnStop(t *testing.T) {
	if _, err := store.FindPostgresBinDir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx := context.Background()
	lp, err := store.StartLocal(ctx, store.LocalOptions{Dir: filepath.Join(publicDir(t), "cluster"), Ephemeral: true})
	require.NoError(t, err)
	done := make(chan error, 1)
	called := make(chan store.LocalEvent, 10)
	go func() {
		done <- lp.Supervise(ctx, store.SuperviseOptions{OnEvent: func(e store.LocalEvent) { called <- e }})
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, lp.Stop(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Supervise did not end on Stop")
	}
	require.Empty(t, called)
}
