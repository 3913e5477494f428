package access

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

func TestKeyringAndBearer(t *testing.T) {
	t.Parallel()
	k := NewKeyring("full-token-0123456789", []*workflow.APIToken{
		{Name: "ci", Token: "ci-token-0123456789abcdef", Roles: []workflow.Role{workflow.RoleRead, workflow.RoleDeploy}},
		{Name: "unset", Roles: []workflow.Role{workflow.RoleRead}},
	})
	require.True(t, k.Enabled())
	p, ok := k.Lookup("full-token-0123456789")
	require.True(t, ok)
	require.Equal(t, workflow.FullAccessToken, p.Name)
	require.Equal(t, workflow.Roles(), p.Roles)
	p, ok = k.Lookup("ci-token-0123456789abcdef")
	require.True(t, ok)
	require.True(t, p.Has(workflow.RoleDeploy))
	require.False(t, p.Has(workflow.RoleOperate))
	require.Equal(t, "read, deploy", p.RoleList())
	for _, bad := range []string{"", "ci-token", "ci-token-0123456789abcdeF"} {
		_, ok := k.Lookup(bad)
		require.False(t, ok, bad)
	}
	require.False(t, NewKeyring("", nil).Enabled())

	for header, want := range map[string]string{"Bearer x": "x", "bearer x": "x", "BEARER  x ": "x", " Bearer x": "x",
		"Basic x": "", "Bearer": "", "Bearer ": "", "x": ""} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", header)
		got, ok := BearerToken(r)
		require.Equal(t, want, got, "%q", header)
		require.Equal(t, want != "", ok, "%q", header)
	}
}

func TestProxies(t *testing.T) {
	t.Parallel()
	_, err := ParseProxies([]string{"10.0.0.0/8", "not-an-ip"})
	require.ErrorContains(t, err, `"not-an-ip" is not an IP address or a CIDR range`)
	p, err := ParseProxies([]string{"10.0.0.0/8,192.0.2.1", "::1"})
	require.NoError(t, err)
	req := func(remote, proto, xff string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if proto != "" {
			r.Header.Set("X-Forwarded-Proto", proto)
		}
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		return r
	}
	require.True(t, p.Secure(req("10.1.2.3:5000", "https", "")))
	require.True(t, p.Secure(req("[::1]:5000", "http, https", "")), "the nearest proxy's value counts")
	require.False(t, p.Secure(req("10.1.2.3:5000", "http", "")))
	require.False(t, p.Secure(req("203.0.113.9:5000", "https", "")), "an untrusted peer's header is ignored")
	var none *Proxies
	require.False(t, none.Secure(req("10.1.2.3:5000", "https", "")))
	tlsReq := req("203.0.113.9:5000", "", "")
	tlsReq.TLS = &tls.ConnectionState{}
	require.True(t, none.Secure(tlsReq))

	require.Equal(t, "198.51.100.7", p.Client(req("10.1.2.3:5000", "", "1.1.1.1, 198.51.100.7, 10.9.9.9")),
		"the nearest untrusted hop; what the client itself wrote further left is not believed")
	require.Equal(t, "203.0.113.9", p.Client(req("203.0.113.9:5000", "", "1.1.1.1")), "an untrusted peer is the client")
	require.Equal(t, "2001:db8:1:2::/64", p.Client(req("[2001:db8:1:2:3:4:5:6]:5000", "", "")), "an IPv6 client is its /64")
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	th := NewThrottle()
	th.now = func() time.Time { return now }
	for range FreeFailures - 1 {
		th.Failed("a")
		require.Zero(t, th.Wait("a"))
	}
	th.Failed("a")
	require.Equal(t, BaseDelay, th.Wait("a"))
	require.Zero(t, th.Wait("b"), "per client")
	now = now.Add(BaseDelay)
	require.Zero(t, th.Wait("a"))
	th.Failed("a")
	require.Equal(t, 2*BaseDelay, th.Wait("a"), "each further failure doubles the wait")
	for range 40 {
		th.Failed("a")
	}
	require.Equal(t, MaxDelay, th.Wait("a"))
	th.Succeeded("a")
	require.Zero(t, th.Wait("a"))
	th.Failed("c")
	now = now.Add(forgetAfter + time.Second)
	require.Zero(t, th.Wait("c"))
	require.NotContains(t, th.clients, "c", "idle clients are forgotten")
}
