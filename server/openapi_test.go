package server

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

// TestOpenAPIMatchesRoutes keeps docs/openapi.yaml honest: it documents
// exactly the (method, path) pairs the server registers, each with the role
// it needs (x-rflow-role) and, when it needs one, its 403; and every path
// parameter of a route is declared.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		OpenAPI string `yaml:"openapi"`
		Paths   map[string]map[string]struct {
			Parameters []struct {
				Name string `yaml:"name"`
				In   string `yaml:"in"`
			} `yaml:"parameters"`
			Responses map[string]any `yaml:"responses"`
			Role      string         `yaml:"x-rflow-role"`
		} `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."), "an OpenAPI 3 document")

	var documented []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path+" "+op.Role)
			require.NotEmpty(t, op.Responses, "%s %s documents no response", method, path)
			_, has403 := op.Responses["403"]
			require.Equal(t, op.Role != "", has403, "%s %s: a 403 exactly when it needs a role", method, path)
			for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
				found := false
				for _, p := range op.Parameters {
					found = found || (p.In == "path" && p.Name == m[1])
				}
				require.True(t, found, "%s %s does not declare path parameter %s", method, path, m[1])
			}
		}
	}
	var registered []string
	for _, rt := range (&Server{}).routes() {
		registered = append(registered, rt.Method+" "+rt.Pattern+" "+string(rt.Role))
	}
	sort.Strings(documented)
	sort.Strings(registered)
	require.Equal(t, registered, documented, "docs/openapi.yaml and the server's routes differ")
}
