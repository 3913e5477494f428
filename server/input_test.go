package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Input Postgres would refuse is the caller's mistake: 400 with the reason,
// nothing stored, never a 500 asking for a retry that can only fail again.
func TestUnstorableInputIs400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	huge := `{"n": ` + strings.Repeat("7", 500_000) + `}`
	deep := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	bodies := map[string]string{
		"nul escape":      `{"a":"x\u0000y"}`,
		"nul in a key":    `{"a\u0000":1}`,
		"lone surrogate":  `{"a":"\udc00"}`,
		"invalid utf-8":   "{\"a\":\"\xff\xfe\"}",
		"500,000 digits":  huge,
		"10,000 brackets": deep,
	}
	for name, body := range bodies {
		r := b.do(t, "POST", "/hooks/open", []byte(body), map[string]string{"Content-Type": "application/json"})
		require.Equal(t, 400, r.status, "webhook, %s: %s", name, r.body)
		require.Equal(t, "bad_body", r.errorCode(t), name)

		input := `{"input": ` + body + `}`
		r = b.api(t, "POST", "/v1/workflows/manual/runs", "k-"+strings.ReplaceAll(name, " ", "-"), []byte(input))
		require.Equal(t, 400, r.status, "command, %s: %s", name, r.body)
		require.Equal(t, "bad_body", r.errorCode(t), name)
	}
	r := b.do(t, "POST", "/hooks/open", []byte(`{}`), map[string]string{"X-Note": "caf\xe9"})
	require.Equal(t, 400, r.status, "%s", r.body)
	require.Equal(t, "bad_header", r.errorCode(t))
	require.Contains(t, string(r.body), "X-Note")

	r = b.api(t, "POST", "/v1/workflows/manual/runs", "key-\xff", []byte(`{}`))
	require.Equal(t, 400, r.status, "%s", r.body)
	require.Equal(t, "bad_header", r.errorCode(t))

	r = b.api(t, "PUT", "/v1/workflows/manual", "deploy-nul", []byte("name: manual\x00\n"))
	require.Equal(t, 400, r.status, "%s", r.body)

	// A NUL inside a definition (a JSON or YAML escape) is the parser's to
	// refuse, with their position.
	for name, def := range map[string][2]string{
		"json escape": {`{"name":"manual","trigger":{"manual":{}},"steps":[{"id":"a","fail":"x\u0000"}]}`, ":1:68"},
		"yaml escape": {"name: manual\ntrigger: { manual: {} }\nsteps: [ { id: a, fail: \"x\\0\" } ]\n", ":3:"},
	} {
		r = b.api(t, "PUT", "/v1/workflows/manual", "deploy-"+strings.ReplaceAll(name, " ", "-"), []byte(def[0]))
		require.Equal(t, 422, r.status, "%s: %s", name, r.body)
		require.Contains(t, string(r.body), def[1], name)
	}

	// A 40 KB definition of nested brackets is refused while it is
	// scanned, with its position, before the YAML parser builds it.
	r = b.api(t, "PUT", "/v1/workflows/manual", "deploy-deep", []byte(strings.Repeat("[", 20_000)+strings.Repeat("]", 20_000)))
	require.Equal(t, 422, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "nested too deeply (more than 200 levels)")
	require.Contains(t, string(r.body), ":1:201")

	require.Zero(t, b.count(t, `SELECT count(*) FROM rflow.workflow_runs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM rflow.idempotency_keys`))
}
