package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// A second project on the bundle's database, served by its own server:
// its paths, queries and replies use its local names, its webhooks and
// manual runs are its own workflows' (stored apart from the home project's
// same-named ones), and another project's run is not found.
func TestServerOfAProjectSpeaksItsLocalNames(t *testing.T) {
	t.Parallel()
	home := setup(t)
	path := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(projectYAML, "name: servertest", "name: other", 1)), 0o600))
	p, err := workflow.Load(path, workflow.LoadOptions{})
	require.NoError(t, err)
	_, err = store.RegisterProject(home.ctx, home.pool, "servertest")
	require.NoError(t, err)
	ns, err := store.RegisterProject(home.ctx, home.pool, "other")
	require.NoError(t, err)
	engine, err := jobs.NewEngine(jobs.Config{Pool: home.pool, Project: p, Namespace: ns, FetchCooldown: time.Millisecond})
	require.NoError(t, err)
	_, err = engine.SyncWorkflows(home.ctx)
	require.NoError(t, err)
	srv, err := server.New(server.Config{Pool: home.pool, Engine: engine, APIToken: testToken})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	other := &testBundle{ctx: home.ctx, pool: home.pool, engine: engine, srv: srv, http: ts}

	r := other.do(t, http.MethodPost, "/hooks/open", []byte(`{"n": 1}`), map[string]string{"Content-Type": "application/json"})
	require.Less(t, r.status, 300, string(r.body))
	require.Equal(t, "open", r.json(t)["workflow"])
	r = other.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run-1", []byte(`{}`))
	require.Less(t, r.status, 300, string(r.body))
	r = home.do(t, http.MethodPost, "/hooks/open", []byte(`{"n": 2}`), map[string]string{"Content-Type": "application/json"})
	require.Less(t, r.status, 300, string(r.body))
	homeRun := r.json(t)["run_id"].(string)
	require.Equal(t, 1, other.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'other.open'`))
	require.Equal(t, 1, other.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'other.manual'`))
	require.Equal(t, 1, other.count(t, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'open'`))

	type listed struct {
		Runs []struct {
			Project  string `json:"project"`
			Workflow string `json:"workflow"`
		} `json:"runs"`
	}
	list := func(b *testBundle, q string) listed {
		r := b.api(t, http.MethodGet, "/v1/runs"+q, "", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		var l listed
		require.NoError(t, json.Unmarshal(r.body, &l))
		return l
	}
	l := list(other, "")
	require.Len(t, l.Runs, 2)
	for _, run := range l.Runs {
		require.Contains(t, []string{"open", "manual"}, run.Workflow)
		require.Empty(t, run.Project)
	}
	require.Len(t, list(other, "?workflow=open").Runs, 1)
	require.Len(t, list(home, "").Runs, 1)
	l = list(home, "?all_projects=true")
	require.Len(t, l.Runs, 3)
	byProject := map[string]int{}
	for _, run := range l.Runs {
		require.Contains(t, []string{"open", "manual"}, run.Workflow)
		byProject[run.Project]++
	}
	require.Equal(t, map[string]int{"other": 2, "servertest": 1}, byProject)

	require.Equal(t, http.StatusNotFound, other.api(t, http.MethodGet, "/v1/runs/"+homeRun, "", nil).status)
	require.Equal(t, http.StatusNotFound, other.api(t, http.MethodPost, "/v1/runs/"+homeRun+"/cancel", "cancel-1", nil).status)
	require.Equal(t, http.StatusOK, home.api(t, http.MethodGet, "/v1/runs/"+homeRun, "", nil).status)

	// A key is a project's: the same key on the home project's API is
	// another request, not a reuse.
	r = home.api(t, http.MethodPost, "/v1/workflows/manual/runs", "run-1", []byte(`{"input": {"x": 1}}`))
	require.Equal(t, http.StatusCreated, r.status, string(r.body))

	r = other.api(t, http.MethodGet, "/v1/workflows", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	var wl struct {
		Workflows []struct {
			Name string `json:"name"`
		} `json:"workflows"`
	}
	require.NoError(t, json.Unmarshal(r.body, &wl))
	var names []string
	for _, w := range wl.Workflows {
		names = append(names, w.Name)
	}
	require.Equal(t, []string{"keyed", "manual", "open", "short-ttl"}, names)
}
