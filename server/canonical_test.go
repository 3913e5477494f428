package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/server"
)

// A client that re-serialises the same command body (other key order,
// spacing, escapes) under the same Idempotency-Key gets the recorded
// response; another value under the key is still a conflict.
func TestCommandBodiesCompareAsCanonicalJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k1",
		[]byte(`{"key": "order-9", "input": {"amount": 10, "to": "0xabc", "memo": "A<b"}}`))
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)

	again := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k1",
		[]byte("{\n  \"input\":{\"memo\":\"\\u0041<b\",\"to\":\"0xabc\",\"amount\":10},\n  \"key\":\"order-9\"\n}"))
	require.Equal(t, first.status, again.status, "%s", again.body)
	require.Equal(t, "true", again.header.Get(server.HeaderReplayed))
	require.Equal(t, string(first.body), string(again.body), "the recorded response, byte for byte")

	for _, body := range []string{
		`{"key": "order-9", "input": {"amount": 10.0, "to": "0xabc", "memo": "A<b"}}`,
		`{"key": "order-9", "input": {"amount": 10, "to": "0xABC", "memo": "A<b"}}`,
	} {
		r := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "k1", []byte(body))
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", body, r.body)
		require.Equal(t, "idempotency_key_reused", r.errorCode(t))
	}
	require.Equal(t, 1, b.runs(t))
}

// A record written before bodies were canonicalised holds the hash of the
// exact body: the same bytes retried after the upgrade replay it.
func TestCommandRecordedBeforeCanonicalBodiesStillReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{ "key": "order-3",  "input": {"b": 2, "a": 1} }`)
	first := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "old", body)
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	h := sha256.New()
	h.Write([]byte("POST\n/v1/workflows/manual/runs\n"))
	h.Write(body)
	_, err := b.pool.Exec(b.ctx, `UPDATE rflow.idempotency_keys SET request_hash = $1`, hex.EncodeToString(h.Sum(nil)))
	require.NoError(t, err)

	again := b.api(t, http.MethodPost, "/v1/workflows/manual/runs", "old", body)
	require.Equal(t, http.StatusCreated, again.status, "%s", again.body)
	require.Equal(t, "true", again.header.Get(server.HeaderReplayed))
}
