package workflow

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A value interpolated into a URL's path segment or query value is
// percent-encoded for its place; an expression that starts the URL is its
// base and is not.
func TestURLTemplateEncodesValues(t *testing.T) {
	t.Parallel()
	path := writeProject(t, `name: w
trigger: { webhook: {} }
steps:
  - id: query
    http_call: { url: "https://api.example/echo?name=${{ body.name }}&token=good" }
  - id: segment
    http_call: { url: "https://api.example/u/${{ body.name }}/x" }
  - id: dots
    http_call: { url: "https://api.example/u/${{ body.dots }}/admin" }
  - id: host
    http_call: { url: "https://${{ body.name }}.api.example/" }
  - id: base
    http_call: { url: "${{ body.base }}/x?q=${{ body.name }}" }
  - id: whole
    http_call: { url: "${{ body.base }}" }
  - id: once
    http_call: { url: "https://api.example/?q=${{ urlencode(body.name) }}", headers: { X-Q: "${{ urlencode(body.name) }}" } }
`)
	p, err := Load(path, LoadOptions{LookupEnv: lookup(nil)})
	require.NoError(t, err)
	env := Env{"body": map[string]any{"name": "x&token=EVIL#/ y", "dots": "..", "base": "https://api.example/v1?k=1"}}
	want := map[string]string{
		"query":   "https://api.example/echo?name=x%26token%3DEVIL%23%2F+y&token=good",
		"segment": "https://api.example/u/x&token=EVIL%23%2F%20y/x",
		"dots":    "https://api.example/u/%2E%2E/admin",
		"host":    "https://x%26token%3DEVIL%23%2F%20y.api.example/",
		"base":    "https://api.example/v1?k=1/x?q=x%26token%3DEVIL%23%2F+y",
		"whole":   "https://api.example/v1?k=1",
		"once":    "https://api.example/?q=x%26token%3DEVIL%23%2F+y",
	}
	steps := p.Workflows[0].Steps
	require.Len(t, steps, len(want))
	for _, s := range steps {
		got, err := s.HTTPCall.URL.String(env)
		require.NoError(t, err, s.ID)
		require.Equal(t, want[s.ID], got, s.ID)
	}
	h, err := steps[len(steps)-1].HTTPCall.Headers["X-Q"].String(env)
	require.NoError(t, err)
	require.Equal(t, "x%26token%3DEVIL%23%2F+y", h, "urlencode() outside a URL")
}
