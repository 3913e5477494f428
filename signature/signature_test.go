package signature_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/signature"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1764505200, 0)
	body := []byte(`{"a":1}`)
	signed := func(secret string, at time.Time) http.Header {
		h := http.Header{}
		signature.SetHeaders(h, secret, body, at)
		return h
	}
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	good := signed("s3cret", now)
	ts := good.Get(signature.HeaderTimestamp)
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   error
	}{
		{"signed now", good, string(body), nil},
		{"signed 4m59s ago", signed("s3cret", now.Add(-signature.MaxAge+time.Second)), string(body), nil},
		{"signed 5m in the future", signed("s3cret", now.Add(signature.MaxAge)), string(body), nil},
		{"wrong secret", signed("other", now), string(body), signature.ErrMismatch},
		{"other body", good, `{"a":2}`, signature.ErrMismatch},
		{"stale timestamp", signed("s3cret", now.Add(-signature.MaxAge-time.Second)), string(body), signature.ErrStale},
		{"future timestamp", signed("s3cret", now.Add(signature.MaxAge+time.Second)), string(body), signature.ErrStale},
		{"timestamp swapped", with(good, signature.HeaderTimestamp, strconv.FormatInt(now.Unix()-1, 10)), string(body), signature.ErrMismatch},
		{"no signature", with(good, signature.HeaderSignature, ""), string(body), signature.ErrMissing},
		{"no timestamp", with(good, signature.HeaderTimestamp, ""), string(body), signature.ErrMissing},
		{"timestamp not a number", with(good, signature.HeaderTimestamp, "yesterday"), string(body), signature.ErrMalformed},
		{"no sha256= prefix", with(good, signature.HeaderSignature, strings.TrimPrefix(good.Get(signature.HeaderSignature), "sha256=")), string(body), signature.ErrMalformed},
		{"not hex", with(good, signature.HeaderSignature, "sha256=zz"), string(body), signature.ErrMalformed},
		{"truncated", with(good, signature.HeaderSignature, good.Get(signature.HeaderSignature)[:21]), string(body), signature.ErrMismatch},
		{"other algorithm", with(good, signature.HeaderSignature, "sha1="+strings.TrimPrefix(good.Get(signature.HeaderSignature), "sha256=")), string(body), signature.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := signature.Verify("s3cret", tc.header, []byte(tc.body), now)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
	require.Equal(t, ts, strconv.FormatInt(now.Unix(), 10), "the timestamp is unix seconds")
}

// FuzzVerify: a request signed with the secret always passes, and any
// change to the body, secret, timestamp or signature fails (never panics).
func FuzzVerify(f *testing.F) {
	f.Add("secret", "other", []byte(`{"a":1}`), []byte(`{"a":2}`), "sha256=00")
	f.Add("", "x", []byte{}, []byte{0}, "")
	f.Fuzz(func(t *testing.T, secret, wrong string, body, other []byte, garbage string) {
		now := time.Unix(1764505200, 0)
		h := http.Header{}
		signature.SetHeaders(h, secret, body, now)
		require.NoError(t, signature.Verify(secret, h, body, now))
		if string(other) != string(body) {
			require.Error(t, signature.Verify(secret, h, other, now))
		}
		// HMAC pads short keys with zero bytes: "k" and "k\x00" are one key.
		if strings.TrimRight(wrong, "\x00") != strings.TrimRight(secret, "\x00") {
			require.ErrorIs(t, signature.Verify(wrong, h, body, now), signature.ErrMismatch)
		}
		require.ErrorIs(t, signature.Verify(secret, h, body, now.Add(signature.MaxAge+time.Second)), signature.ErrStale)
		if !strings.EqualFold(garbage, h.Get(signature.HeaderSignature)) {
			h.Set(signature.HeaderSignature, garbage)
			require.Error(t, signature.Verify(secret, h, body, now))
		}
	})
}
