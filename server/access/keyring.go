package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/rflow-dev/rflow/workflow"
)

// Keyring holds the API tokens a request may present. Create it with
// NewKeyring.
type Keyring struct {
	entries []keyEntry
}

type keyEntry struct {
	digest    [sha256.Size]byte
	principal Principal
}

// NewKeyring builds the keyring of the full-access token (RFLOW_API_TOKEN;
// empty: none) and the project's scoped tokens. A keyring without any
// token disables the API, the console and River UI.
func NewKeyring(full string, scoped []*workflow.APIToken) *Keyring {
	k := &Keyring{}
	if full != "" {
		k.entries = append(k.entries, keyEntry{digest: sha256.Sum256([]byte(full)),
			principal: Principal{Name: workflow.FullAccessToken, Roles: workflow.Roles()}})
	}
	for _, t := range scoped {
		if !t.Token.IsSet() {
			continue
		}
		k.entries = append(k.entries, keyEntry{digest: sha256.Sum256([]byte(t.Token.Reveal())),
			principal: Principal{Name: t.Name, Roles: append([]workflow.Role(nil), t.Roles...)}})
	}
	return k
}

// Enabled reports whether any token is configured.
func (k *Keyring) Enabled() bool { return k != nil && len(k.entries) > 0 }

// Lookup returns the principal of token. It compares digests with every
// token, whichever matches, so its time tells nothing about which token
// (or how much of one) was right.
func (k *Keyring) Lookup(token string) (Principal, bool) {
	if k == nil || token == "" {
		return Principal{}, false
	}
	digest := sha256.Sum256([]byte(token))
	found := -1
	for i, e := range k.entries {
		if subtle.ConstantTimeCompare(digest[:], e.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return k.entries[found].principal, true
}

// BearerToken is the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 9110 §11.1), so "bearer" and
// "BEARER" work as "Bearer" does.
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
