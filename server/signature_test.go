package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

// FuzzVerifySignature: a request signed with the secret always passes, and
// any change to the body, timestamp or signature fails (never panics).
func FuzzVerifySignature(f *testing.F) {
	f.Add("secret", []byte(`{"a":1}`), []byte(`{"a":2}`), "sha256=00")
	f.Add("", []byte{}, []byte{0}, "")
	f.Fuzz(func(t *testing.T, secret string, body, other []byte, garbage string) {
		now := time.Unix(1764505200, 0)
		ts := strconv.FormatInt(now.Unix(), 10)
		h := http.Header{}
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, Sign(secret, ts, body))
		require.Nil(t, verifySignature(workflow.Secret(secret), h, body, now))
		if string(other) != string(body) {
			require.NotNil(t, verifySignature(workflow.Secret(secret), h, other, now))
		}
		require.NotNil(t, verifySignature(workflow.Secret(secret), h, body, now.Add(MaxSignatureAge+time.Second)))
		if !strings.EqualFold(garbage, h.Get(HeaderSignature)) {
			h.Set(HeaderSignature, garbage)
			require.NotNil(t, verifySignature(workflow.Secret(secret), h, body, now))
		}
	})
}
