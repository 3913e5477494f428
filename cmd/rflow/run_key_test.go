package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// rflow run without --key prints the key it made up and the command that
// repeats the call safely; repeating it starts no second run.
func TestRunWithoutKeyPrintsTheKeyToRepeatWith(t *testing.T) {
	t.Parallel()
	config := writeProject(t, "manual: {}", "http://127.0.0.1:1")
	db := storetest.URL(t)
	stdout, stderr, code := rflowCmd(t, "--database-url", db, "run", "pipeline", "-c", config)
	require.Equal(t, 0, code, stderr)
	m := regexp.MustCompile(`rflow run pipeline --key (manual:[0-9a-f-]{36})\n`).FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	run := regexp.MustCompile(`run ([0-9a-f-]{36}) queued`).FindStringSubmatch(stdout)
	require.NotNil(t, run, stdout)

	again, stderr, code := rflowCmd(t, "--database-url", db, "run", "pipeline", "-c", config, "--key", m[1])
	require.Equal(t, 0, code, stderr)
	require.Contains(t, again, "already has run "+run[1]+": nothing new started")
	require.False(t, strings.Contains(again, "to repeat this call"), "a key given is not repeated back")
}
