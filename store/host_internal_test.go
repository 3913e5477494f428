package store

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A process killed and not yet reaped (a zombie) is gone; a live one and
// this one are not.
func TestProcessGone(t *testing.T) {
	t.Parallel()
	require.False(t, processGone(os.Getpid()))
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	require.False(t, processGone(cmd.Process.Pid))
	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool { return processGone(cmd.Process.Pid) }, 5*time.Second, 10*time.Millisecond,
		"a killed, unreaped process is a zombie: gone")
	_ = cmd.Wait()
	require.True(t, processGone(cmd.Process.Pid), "reaped: no such pid")
}
