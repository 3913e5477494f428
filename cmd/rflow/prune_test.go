package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store/storetest"
)

// TestRunsPrune runs `rflow runs prune` as a user does: a dry run counts,
// the real run deletes old completed and cancelled runs only, failed runs
// go with --status failed, and bad flags are usage errors.
func TestRunsPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `
		INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1);
		INSERT INTO rflow.workflow_runs (id, workflow_name, generation, trigger_key, trigger_kind, trigger, status, finished_at)
		SELECT gen_random_uuid(), 'wf', 1, 'k' || i, 'manual', '{}',
		       (ARRAY['completed', 'cancelled', 'failed', 'running'])[1 + i % 4],
		       CASE WHEN i % 4 <> 3 THEN now() - interval '40 days' END
		FROM generate_series(0, 39) i;
		UPDATE rflow.workflow_runs SET finished_at = now() WHERE trigger_key IN ('k0', 'k1', 'k2')`)
	require.NoError(t, err)
	count := func(status string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.workflow_runs WHERE status = $1`, status).Scan(&n))
		return n
	}

	out, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "prune", "--older-than", "30d", "--dry-run", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var res struct {
		Runs     int      `json:"runs"`
		DryRun   bool     `json:"dry_run"`
		Statuses []string `json:"statuses"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 18, res.Runs, "10 completed + 10 cancelled, less the two that just finished")
	require.True(t, res.DryRun)
	require.Equal(t, []string{"cancelled", "completed"}, res.Statuses)
	require.Equal(t, 10, count("completed"), "a dry run deleted")

	out, stderr, code = rflowCmd(t, "--database-url", dbURL, "runs", "prune", "--older-than", "30d", "--batch", "4")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "pruned 18 run(s)")
	require.Equal(t, 1, count("completed"))
	require.Equal(t, 1, count("cancelled"))
	require.Equal(t, 10, count("failed"))
	require.Equal(t, 10, count("running"))

	out, stderr, code = rflowCmd(t, "--database-url", dbURL, "runs", "prune", "--older-than", "30d", "--status", "failed")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "pruned 9 run(s)")
	require.Equal(t, 1, count("failed"))
	require.Equal(t, 10, count("running"), "an unfinished run was pruned")

	for _, bad := range [][]string{{"--older-than", "30"}, {"--older-than", "30d", "--status", "running"}, {}} {
		_, stderr, code = rflowCmd(t, append([]string{"--database-url", dbURL, "runs", "prune"}, bad...)...)
		require.Equal(t, 2, code, "%v: %s", bad, stderr)
	}
}

// TestStartServesConsole: `rflow start --http` serves the console; a
// browser without a session is sent to the login form, and logging in
// with the API token opens the runs page.
func TestStartServesConsole(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`
name: ui
workflows:
  - name: manual
    trigger: { manual: {} }
    steps:
      - { id: nothing, noop: {} }
`), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	p := startStandbyTest(t, storetest.URL(t), config, []string{"RFLOW_API_TOKEN=ui-t0ken"}, "--http", addr)
	defer p.stop(t)
	base := "http://" + addr
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var res *http.Response
	require.Eventually(t, func() bool {
		res, err = c.Get(base + "/ui/")
		if err != nil {
			return false
		}
		res.Body.Close()
		return true
	}, 30*time.Second, 50*time.Millisecond, "output: %s", p.out)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ui/login?next=%2Fui%2F", res.Header.Get("Location"))

	res, err = c.PostForm(base+"/ui/login", url.Values{"token": {"ui-t0ken"}, "next": {"//evil.example/"}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/ui/", res.Header.Get("Location"), "a login redirect left the console")
	cookies := res.Cookies()
	require.Len(t, cookies, 1)
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	req.AddCookie(cookies[0])
	res, err = c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), "<h1>Runs</h1>")
	require.Contains(t, string(body), fmt.Sprintf(`<option value="%s"`, "manual"))
}
