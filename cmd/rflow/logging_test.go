package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
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
