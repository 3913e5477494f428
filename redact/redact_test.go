package redact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://user:pw@example.com/x?token=abc", "https://user:xxxxx@example.com/x?token=xxxxx"},
		{"https://:key@mainnet.example.io", "https://:xxxxx@mainnet.example.io"},
		{"postgres://rflow@127.0.0.1:5432/db", "postgres://rflow@127.0.0.1:5432/db"},
		{"postgres://rflow:s3cret@127.0.0.1:5432/db?sslmode=disable&password=pw", "postgres://rflow:xxxxx@127.0.0.1:5432/db?sslmode=disable&password=xxxxx"},
		{"postgres://postgres@127.0.0.1:39947/rflow_test_17773f2f6cfb?sslmode=disable", "postgres://postgres@127.0.0.1:39947/rflow_test_17773f2f6cfb?sslmode=disable"},
		{"https://eth-mainnet.g.example.com/v2/Xy3_kLmN0pQrStUvWxYz12_34", "https://eth-mainnet.g.example.com/v2/xxxxx"},
		{"https://u:p/w@d@host/x", "https://u:xxxxx@host/x"},
		{"https://h/x?a=1&b=&c&=d", "https://h/x?a=xxxxx&b=&xxxxx&=xxxxx"},
		{"https://h/x?", "https://h/x?"},
		{"https://h/cb#access_token=abc", "https://h/cb#xxxxx"},
		{"https://mainnet.infura.io/v3/9aa3d95b3bc440fa88ea12eaa4456161", "https://mainnet.infura.io/v3/xxxxx"},
		{"https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXX1234XXXXXXXX", "https://hooks.slack.com/services/T0000/B0000/xxxxx"},
		{"http://127.0.0.1:8080/v1/runs/0b7f3c2e-8d1a-4c55-9f7e-2b6a1f0c9d3e", "http://127.0.0.1:8080/v1/runs/0b7f3c2e-8d1a-4c55-9f7e-2b6a1f0c9d3e"},
		{"http://h/a_very_long_path_name_without_digits", "http://h/a_very_long_path_name_without_digits"},
		{"host=db user=rflow password=s3cret dbname=x", "host=db user=rflow password=xxxxx dbname=x"},
		{"host=db password='s3 cret' dbname=x", "host=db password=xxxxx dbname=x"},
		{"not a url", "not a url"},
		{"", ""},
	} {
		require.Equal(t, tc.want, redact.URL(tc.in), tc.in)
	}
}

// A transport error from net/http repeats the request URL (query and all)
// inside the message; Error scrubs it and keeps the chain.
func TestErrorScrubsWrappedURLError(t *testing.T) {
	t.Parallel()
	raw := "http://user:hunter2@127.0.0.1:1/x?token=SECRET"
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	wrapped := fmt.Errorf("GET %s: %w", raw, err)
	require.Contains(t, wrapped.Error(), "SECRET", "the premise: url.Error repeats the query")

	clean := redact.Error(wrapped)
	require.NotContains(t, clean.Error(), "SECRET")
	require.NotContains(t, clean.Error(), "hunter2")
	require.Contains(t, clean.Error(), "127.0.0.1:1/x?token=xxxxx")
	var uerr *url.Error
	require.ErrorAs(t, clean, &uerr)
	require.NoError(t, redact.Error(nil))
	plain := errors.New("no url here")
	require.Equal(t, plain, redact.Error(plain))
}

func TestText(t *testing.T) {
	t.Parallel()
	in := `dial "wss://node.example/ws?key=abc" then 'https://a:b@h/p', password=pw and https://h/ok. GET https://h/x?t=1: refused (see https://h/y?t=2)`
	require.Equal(t, `dial "wss://node.example/ws?key=xxxxx" then 'https://a:xxxxx@h/p', password=xxxxx and https://h/ok. GET https://h/x?t=xxxxx: refused (see https://h/y?t=xxxxx)`, redact.Text(in))
}

func TestHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(redact.Handler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log = log.With("db", "postgres://u:dbpw@h/db")
	log.WarnContext(context.Background(), "call https://h/x?token=t1 failed",
		"url", "https://h/x?token=t2",
		"err", fmt.Errorf("wrap: %w", errors.New(`Get "https://u:pw3@h/?token=t3": refused`)),
		slog.Group("req", "u", "https://h/?token=t4"),
		"n", 7)
	out := buf.String()
	for _, secret := range []string{"dbpw", "t1", "t2", "pw3", "t3", "t4"} {
		require.NotContains(t, out, secret+"\"", out)
		require.NotContains(t, out, "="+secret, out)
	}
	require.Equal(t, 6, strings.Count(out, "xxxxx"), out)
	require.Contains(t, out, `"n":7`)
}
