package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// rflowEnv runs the rflow binary with env (NAME=value) added to, and unset
// (NAME alone) removed from, the test's environment.
func rflowEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(rflowBin, args...)
	drop := map[string]bool{}
	var add []string
	for _, e := range env {
		if name, _, ok := strings.Cut(e, "="); ok {
			drop[name] = true
			add = append(add, e)
		} else {
			drop[e] = true
		}
	}
	for _, e := range os.Environ() {
		if name, _, _ := strings.Cut(e, "="); !drop[name] {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, add...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

func TestGlobalFlagsAfterTheCommand(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	for _, args := range [][]string{
		{"migrate", "--database-url", url},
		{"migrate", "status", "--database-url=" + url, "--log-level", "debug"},
		{"runs", "list", "--database-url", url, "--log-level=warn", "--limit", "5"},
		{"workflows", "ls", "-o", "json", "--database-url", url},
	} {
		out, stderr, code := rflowCmd(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.NotContains(t, stderr, "flag provided but not defined")
		if args[0] == "migrate" && len(args) == 3 {
			require.Contains(t, out, "up to date")
		}
	}
	// start reaches its project file, so it parsed --database-url.
	_, stderr, code := rflowCmd(t, "start", "-c", filepath.Join(t.TempDir(), "missing.yaml"), "--database-url", url)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "missing.yaml: no such project file")

	for _, v := range []string{"--version", "-v"} {
		out, _, code := rflowCmd(t, v)
		require.Equal(t, 0, code)
		require.True(t, strings.HasPrefix(out, "rflow "), out)
	}
	// A command's own flags win; --version is global only in front.
	out, stderr, code := rflowCmd(t, "runs", "list", "-v")
	require.Equal(t, 2, code)
	require.NotContains(t, out, "rflow ")
	require.Contains(t, stderr, "-v")
}

func TestVersionOfAGoBuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"}, // go install …@v1.4.0
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "996c17e7dd6e0123456789abcdef0123456789ab"}, {Key: "vcs.modified", Value: "true"},
		}}, "dev-996c17e7dd6e-dirty"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "996c17e7dd6e0123456789abcdef0123456789ab"}, {Key: "vcs.modified", Value: "false"},
		}}, "dev-996c17e7dd6e"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"}, // -buildvcs=false
	} {
		require.Equal(t, tc.want, stampedVersion(&tc.bi))
	}
	// -ldflags wins over what the toolchain stamped.
	bin := filepath.Join(t.TempDir(), "rflow")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.Equal(t, "rflow v9.8.7\n", string(got))
}

func TestDidYouMean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"strat"}, `did you mean "start"?`},
		{[]string{"valdiate"}, `did you mean "validate"?`},
		{[]string{"stauts"}, `did you mean "status"?`},
		{[]string{"workflow", "ls"}, `did you mean "workflows"?`},
		{[]string{"runs", "lsit"}, `runs: unknown command "lsit": did you mean "list"?`},
		{[]string{"runs", "retyr", "x"}, `did you mean "retry"?`},
	} {
		_, stderr, code := rflowCmd(t, tc.args...)
		require.Equal(t, 2, code, "%v", tc.args)
		require.Contains(t, stderr, tc.want, "%v", tc.args)
	}
	_, stderr, code := rflowCmd(t, "xyzzy")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "xyzzy"`)
	require.NotContains(t, stderr, "did you mean")
}

func TestHelpIsTidy(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"runs", "--help"}, {"start", "--help"}, {"runs", "list", "--help"}} {
		out, _, code := rflowCmd(t, args...)
		require.Equal(t, 0, code)
		require.NotContains(t, out, "MISC", "%v", args)
		// Options are one line each, with no blank line among them.
		_, opts, ok := strings.Cut(out, "OPTIONS:\n")
		require.True(t, ok, "%v: %s", args, out)
		for _, line := range strings.Split(strings.TrimRight(opts, "\n"), "\n") {
			require.True(t, strings.HasPrefix(strings.TrimSpace(line), "-"), "%v: stray line %q in\n%s", args, line, out)
		}
	}
	out, _, _ := rflowCmd(t, "start", "--help")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--body-limit") {
			require.Equal(t, 1, strings.Count(line, "default"), line)
			require.Contains(t, line, "1 MiB")
		}
	}
}

// TestDevHelpNamesItsDataDirectory: the data directory `rflow dev --help`
// names is the one it uses, which is keyed by the project (not always
// quickstart), as the README says.
func TestDevHelpNamesItsDataDirectory(t *testing.T) {
	t.Parallel()
	out, _, code := rflowCmd(t, "dev", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "$XDG_DATA_HOME/rflow/<project>")
	require.Contains(t, out, "/var/lib/rflow/<project> as root")
	require.NotContains(t, out, "rflow/quickstart)")
}

func TestReadCommandsBeforeMigrate(t *testing.T) {
	t.Parallel()
	url := storetest.EmptyURL(t)
	for _, args := range [][]string{
		{"runs", "list"},
		{"runs", "show", uuid.NewString()},
		{"runs", "show", "0123abcd"},
		{"runs", "cancel", uuid.NewString()},
		{"workflows", "ls"},
		{"workflows", "pause", "hello"},
	} {
		_, stderr, code := rflowCmd(t, append([]string{"--database-url", url}, args...)...)
		require.Equal(t, 1, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "the database has no rflow schema yet: run `rflow migrate` or `rflow start` first", "%v", args)
		require.NotContains(t, stderr, "does not exist", "%v", args)
	}
}

// TestListAliases: every listing answers to both ls and list, whichever
// the reference spells (runs list, workflows ls), so neither is a usage
// error.
func TestListAliases(t *testing.T) {
	t.Parallel()
	url := storetest.EmptyURL(t)
	for _, args := range [][]string{
		{"runs", "ls"}, {"workflows", "list"}, {"budgets", "list"}, {"approvals", "ls"},
	} {
		_, stderr, code := rflowCmd(t, append([]string{"--database-url", url}, args...)...)
		require.Equal(t, 1, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "the database has no rflow schema yet", "%v", args)
	}
}

func TestReadCommandsCreateNoLocalDatabase(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	env := []string{"XDG_DATA_HOME=" + data, "DATABASE_URL"}
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte("name: nodb\n"), 0o644))
	for _, args := range [][]string{
		{"runs", "list", "-c", config},
		{"runs", "show", uuid.NewString(), "-c", config},
		{"workflows", "ls", "-c", config},
		{"migrate", "status", "-c", config},
	} {
		_, stderr, code := rflowEnv(t, env, args...)
		require.Equal(t, 1, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "there is no local database for project nodb yet", "%v", args)
		require.Contains(t, stderr, "`rflow start` or `rflow migrate` creates it", "%v", args)
	}
	_, err := os.Stat(filepath.Join(data, "rflow", "nodb", "data"))
	require.True(t, os.IsNotExist(err), "a read command created the embedded cluster")
}

const freshProject = `
name: fresh
workflows:
  - name: hello
    trigger: { manual: {} }
    steps:
      - { id: nap, delay: 1h }
`

func TestRunOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	url := storetest.EmptyURL(t)
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(freshProject), 0o644))
	out, stderr, code := rflowCmd(t, "run", "hello", "-c", config, "--database-url", url, "-o", "json")
	require.Equal(t, 0, code, stderr)
	var started struct {
		RunID   string `json:"run_id"`
		Created bool   `json:"created"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.True(t, started.Created)
	out, stderr, code = rflowCmd(t, "runs", "show", started.RunID, "--database-url", url, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"workflow": "hello"`)
	out, _, code = rflowCmd(t, "workflows", "ls", "--database-url", url)
	require.Equal(t, 0, code)
	require.Contains(t, out, "hello")

	_, stderr, code = rflowCmd(t, "run", "nope", "-c", config, "--database-url", url)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "workflow nope is not in "+config)
}

// claimRuns deploys workflow and claims n runs of it in one transaction
// (so they share created_at), returning their ids.
func claimRuns(t *testing.T, pool *pgxpool.Pool, workflow string, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var ids []uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := store.DeployWorkflow(ctx, tx, workflow, "h-"+workflow, []byte(`{"name":"`+workflow+`"}`)); err != nil {
			return err
		}
		claims := make([]store.Claim, n)
		for i := range claims {
			claims[i] = store.Claim{Workflow: workflow, TriggerKey: fmt.Sprint(i), TriggerKind: "manual"}
		}
		runs, err := store.ClaimRuns(ctx, tx, claims)
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		return err
	}))
	require.Len(t, ids, n)
	return ids
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

type runListJSON struct {
	Runs []struct {
		ID string `json:"id"`
	} `json:"runs"`
	NextCursor string `json:"next_cursor"`
}

func TestRunsListPages(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	claimRuns(t, openPool(t, url), "many", 5003)
	list := func(args ...string) runListJSON {
		t.Helper()
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", url, "runs", "list", "-o", "json"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var l runListJSON
		require.NoError(t, json.Unmarshal([]byte(out), &l))
		return l
	}
	first := list("--limit", "5000")
	require.Len(t, first.Runs, 5000)
	require.NotEmpty(t, first.NextCursor)
	rest := list("--limit", "5000", "--after", first.NextCursor)
	require.Len(t, rest.Runs, 3)
	require.Empty(t, rest.NextCursor)
	seen := map[string]bool{}
	for _, r := range append(first.Runs, rest.Runs...) {
		seen[r.ID] = true
	}
	require.Len(t, seen, 5003, "the pages neither repeat nor skip a run")

	all := list("--all")
	require.Len(t, all.Runs, 5003)
	require.Empty(t, all.NextCursor)
	out, _, code := rflowCmd(t, "--database-url", url, "runs", "list", "--all")
	require.Equal(t, 0, code)
	require.Equal(t, 5004, strings.Count(out, "\n"), "a header and every run")

	_, stderr, code := rflowCmd(t, "--database-url", url, "runs", "list", "--status", "bogus")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--status "bogus" is not a run status`)
	require.Contains(t, stderr, "waiting_approval")
	_, stderr, code = rflowCmd(t, "--database-url", url, "runs", "list", "--after", uuid.NewString())
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not found")
}

func TestShortRunIDs(t *testing.T) {
	t.Parallel()
	url := storetest.URL(t)
	pool := openPool(t, url)
	ids := claimRuns(t, pool, "short", 3)
	short := store.ShortID(ids[0])
	out, stderr, code := rflowCmd(t, "--database-url", url, "runs", "show", short)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, ids[0].String())
	out, stderr, code = rflowCmd(t, "--database-url", url, "runs", "cancel", store.ShortID(ids[1]), "-c", "/nonexistent/rflow.yaml")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "run "+ids[1].String()+" cancelled")

	// Give the third run the same short id as the first.
	twin := uuid.MustParse(ids[2].String()[:28] + short)
	_, err := pool.Exec(context.Background(), `UPDATE rflow.workflow_runs SET id = $1 WHERE id = $2`, twin, ids[2])
	require.NoError(t, err)
	_, stderr, code = rflowCmd(t, "--database-url", url, "runs", "show", short)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "short id "+short+" matches more than one run")
	require.Contains(t, stderr, ids[0].String())
	require.Contains(t, stderr, twin.String())
	_, stderr, code = rflowCmd(t, "--database-url", url, "runs", "show", "ffffffff")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no run has the short id ffffffff")
	// The first 8 characters of an id (a UUIDv7's timestamp, which git
	// users reach for) are not its short id: the error says which are.
	_, stderr, code = rflowCmd(t, "--database-url", url, "runs", "show", ids[0].String()[:8])
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "a short id is the last 8 characters of a run id")
}

const secretProject = `
name: secret
env: [RFLOW_TEST_GREETING]
wallets:
  - { name: ops, private_key: "${RFLOW_TEST_OPS_KEY}" }
workflows:
  - name: hello
    trigger: { manual: {} }
    steps:
      - { id: flaky, http_call: { url: "%[1]s/flaky" } }
`

// Operator commands need the database, not the secrets of the process that
// works the runs.
func TestOperatorCommandsNeedNoSecrets(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(secretProject, srv.URL)), 0o644))
	key := "RFLOW_TEST_OPS_KEY=0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
	db := storetest.URL(t)
	greeting := "RFLOW_TEST_GREETING=hello"
	p := startRflowArgs(t, []string{key, greeting}, "--database-url", db, "--log-level", "warn", "start", "-c", config)
	defer p.stop(t)
	withKey, noKey := []string{key, greeting}, []string{"RFLOW_TEST_OPS_KEY", "RFLOW_TEST_GREETING"}
	cli := func(env []string, args ...string) (string, string, int) {
		return rflowEnv(t, env, append([]string{"--database-url", db}, args...)...)
	}
	out, stderr, code := cli(withKey, "run", "hello", "-c", config, "-o", "json")
	require.Equal(t, 0, code, stderr)
	var started struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	id := uuid.MustParse(started.RunID)
	require.Eventually(t, func() bool {
		out, _, _ := cli(noKey, "runs", "show", started.RunID, "-o", "json")
		return strings.Contains(out, `"status": "failed"`)
	}, 20*time.Second, 100*time.Millisecond)

	// Without the key, the project still loads for an operator command.
	fail.Store(false)
	out, stderr, code = cli(noKey, "runs", "retry", store.ShortID(id), "-c", config)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "run "+started.RunID+" retried")
	require.Eventually(t, func() bool {
		out, _, _ := cli(noKey, "runs", "show", started.RunID, "-o", "json")
		return strings.Contains(out, `"status": "completed"`)
	}, 20*time.Second, 100*time.Millisecond)
	_, stderr, code = cli(noKey, "workflows", "pause", "hello", "-c", config)
	require.Equal(t, 0, code, stderr)
	out, stderr, code = cli(noKey, "workflows", "resume", "hello", "-c", config)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resumed")
	// A command that works the project still needs the key, and says so.
	_, stderr, code = cli(noKey, "validate", "-c", config)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "RFLOW_TEST_OPS_KEY is not set")
}
