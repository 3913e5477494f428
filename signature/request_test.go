package signature_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/signature"
)

func TestVerifyRequest(t *testing.T) {
	t.Parallel()
	now := time.Unix(1764505200, 0)
	body := []byte(`{"id":"o-1"}`)
	sign := func(path string, signed ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.Header.Set("X-Idempotency-Key", "k1")
		signature.SignRequest(r, "s3cret", body, signed, now)
		return r
	}
	need := signature.VerifyOptions{RequireHeaders: []string{"X-Idempotency-Key"}}
	v1 := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/hooks/a", nil)
		signature.SetHeaders(r.Header, "s3cret", body, now)
		return r
	}

	scheme, err := signature.VerifyRequest("s3cret", sign("/hooks/a", "x-idempotency-key"), body, now, need)
	require.NoError(t, err)
	require.Equal(t, signature.SchemeV2, scheme)

	moved := sign("/hooks/a", "x-idempotency-key")
	moved.URL.Path = "/hooks/b"
	_, err = signature.VerifyRequest("s3cret", moved, body, now, signature.VerifyOptions{})
	require.ErrorIs(t, err, signature.ErrMismatch, "another path")

	changed := sign("/hooks/a", "x-idempotency-key")
	changed.Header.Set("X-Idempotency-Key", "k2")
	_, err = signature.VerifyRequest("s3cret", changed, body, now, need)
	require.ErrorIs(t, err, signature.ErrMismatch, "another signed header value")

	_, err = signature.VerifyRequest("s3cret", sign("/hooks/a"), body, now, need)
	require.ErrorIs(t, err, signature.ErrUnsignedHeader)

	_, err = signature.VerifyRequest("s3cret", sign("/hooks/a"), []byte(`{"id":"o-2"}`), now, signature.VerifyOptions{})
	require.ErrorIs(t, err, signature.ErrMismatch, "another body")

	_, err = signature.VerifyRequest("s3cret", sign("/hooks/a"), body, now.Add(6*time.Minute), signature.VerifyOptions{})
	require.ErrorIs(t, err, signature.ErrStale)

	_, err = signature.VerifyRequest("other", sign("/hooks/a"), body, now, signature.VerifyOptions{})
	require.ErrorIs(t, err, signature.ErrMismatch, "another secret")

	_, err = signature.VerifyRequest("s3cret", v1(), body, now, signature.VerifyOptions{})
	require.ErrorIs(t, err, signature.ErrLegacy)
	scheme, err = signature.VerifyRequest("s3cret", v1(), body, now, signature.VerifyOptions{AllowV1: true})
	require.NoError(t, err)
	require.Equal(t, signature.SchemeV1, scheme)

	_, err = signature.VerifyRequest("s3cret", httptest.NewRequest(http.MethodPost, "/hooks/a", nil), body, now, signature.VerifyOptions{})
	require.ErrorIs(t, err, signature.ErrMissing)
}
