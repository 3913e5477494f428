package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Trigger data cannot rewrite a step's URL: a webhook body interpolated
// into a query value stays that one value, end to end through a real
// server, engine and Postgres.
func TestWebhookDataCannotRewriteURL(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []url.Values
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Query())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(echo.Close)
	b := newBundle(t, strings.ReplaceAll(`
name: urls
workflows:
  - name: echo
    trigger: { webhook: {} }
    steps:
      - id: call
        http_call: { url: "ECHO/echo?name=${{ body.name }}&token=good" }
`, "ECHO", echo.URL), true)
	r := b.do(t, http.MethodPost, "/hooks/echo", []byte(`{"name":"x&token=EVIL#"}`), nil)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	}, 30*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"x&token=EVIL#"}, got[0]["name"])
	require.Equal(t, []string{"good"}, got[0]["token"])
}
