package access

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies (rflow start --trusted-proxy) whose
// X-Forwarded-Proto and X-Forwarded-For rflow believes. Those headers from
// any other peer are ignored: anyone can send them.
type Proxies struct {
	prefixes []netip.Prefix
}

// ParseProxies reads --trusted-proxy values: IP addresses or CIDR ranges.
func ParseProxies(list []string) (*Proxies, error) {
	p := &Proxies{}
	for _, s := range list {
		for _, item := range strings.Split(s, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if pfx, err := netip.ParsePrefix(item); err == nil {
				p.prefixes = append(p.prefixes, pfx.Masked())
				continue
			}
			addr, err := netip.ParseAddr(item)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q is not an IP address or a CIDR range (10.0.0.1, 10.0.0.0/8)", item)
			}
			addr = addr.Unmap()
			p.prefixes = append(p.prefixes, netip.PrefixFrom(addr, addr.BitLen()))
		}
	}
	return p, nil
}

// peer is the address of the connection's other end.
func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

func (p *Proxies) trusts(a netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Secure reports whether the browser reached rflow over HTTPS: TLS ended
// here, or a trusted proxy says it ended there (X-Forwarded-Proto: https).
// The console's session cookie is Secure exactly then.
func (p *Proxies) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	a, ok := peer(r)
	if !ok || !p.trusts(a) {
		return false
	}
	// The proxy nearest rflow appends last: believe the last value.
	values := strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(values[len(values)-1]), "https")
}

// Client is the address of the client a request comes from: the peer, or,
// when the peer is a trusted proxy, the nearest address in X-Forwarded-For
// that is not one. IPv6 clients are their /64, the block one host holds.
func (p *Proxies) Client(r *http.Request) string {
	a, ok := peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if p.trusts(a) {
		hops := strings.Split(r.Header.Get("X-Forwarded-For"), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			a = h.Unmap()
			if !p.trusts(a) {
				break
			}
		}
	}
	if a.Is6() {
		pfx, _ := a.Prefix(64)
		return pfx.String()
	}
	return a.String()
}
