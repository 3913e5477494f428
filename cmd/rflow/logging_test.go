package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRiverShutdownErrorsAreDebug: River logs work our shutdown cut short
// (a cancelled context) as an error; it is not one, so it is logged at debug.
// Other River errors keep their level.
func TestRiverShutdownErrorsAreDebug(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := logger(&buf, logFormatText, slog.LevelInfo).With("component", "river")
	l.Error("Client: Failed to send job insert notification", "err", fmt.Errorf("notify: %w", context.Canceled))
	l.Error("Client: Failed to send job insert notification", "err", "context canceled")
	require.Empty(t, buf.String())
	l.Error("Client: something broke", "err", "connection refused")
	require.Contains(t, buf.String(), "level=ERROR")
}

// The warnings the live view shows as its own lines are still logged under
// these messages: a reworded one would reach the terminal beside the
// view's line again.
func TestShownByViewMessagesExist(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	for _, pattern := range []string{"../../jobs/*.go", "../../chain/*.go"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			src.Write(b)
		}
	}
	for msg := range shownByView {
		require.Contains(t, src.String(), `"`+msg+`"`, "no log call has the message the live view drops")
	}
}

// TestDevNullIsNoTerminal: /dev/null is a character device, but output
// sent there (a service manager's default) must not start the live view.
func TestDevNullIsNoTerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	t.Setenv("TERM", "xterm")
	require.False(t, isTerminal(f))
}
