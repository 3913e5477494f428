package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// TestProjectNameWithoutConfig: with no -c and no rflow.yaml here, a
// command uses the database of the project rflow dev last ran, then the
// quickstart's, then default's. Not parallel: it sets XDG_DATA_HOME and
// the working directory, as a user's shell does.
func TestProjectNameWithoutConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_DATA_HOME", home)
	t.Chdir(t.TempDir())
	name := func(args ...string) string {
		var got string
		app := &cli.App{Flags: []cli.Flag{configFlag()}, Action: func(c *cli.Context) error { got = projectName(c); return nil }}
		require.NoError(t, app.Run(append([]string{"rflow"}, args...)))
		return got
	}
	database := func(project string) {
		dir := filepath.Join(home, "rflow", project, "data")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("17\n"), 0o644))
	}

	require.Equal(t, defaultProject, name(), "nothing made yet")
	database(quickstartName)
	require.Equal(t, quickstartName, name())
	require.NoError(t, rememberDevProject("approvals-example"))
	require.Equal(t, quickstartName, name(), "the dev project has no embedded database")
	database("approvals-example")
	require.Equal(t, "approvals-example", name(), "the project rflow dev last ran")
	require.Equal(t, defaultProject, name("-c", "missing.yaml"), "-c names the project; never a guess")

	require.NoError(t, os.WriteFile(filepath.Join(home, "rflow", devProjectFile), []byte("../etc\n"), 0o644))
	require.Equal(t, quickstartName, name(), "a record that is not a project name is ignored")

	require.NoError(t, rememberDevProject("approvals-example"))
	require.NoError(t, os.WriteFile("rflow.yaml", []byte("name: here\n"), 0o644))
	require.Equal(t, "here", name(), "the project file here wins")
	require.NoError(t, os.Remove("rflow.yaml"))
	database(defaultProject)
	require.Equal(t, defaultProject, name(), "a default project's database comes first, as before")
}
