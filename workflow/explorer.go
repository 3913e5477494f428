package workflow

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/rflow-dev/rflow/redact"
)

// A network's explorer: is the base URL of a block explorer (Etherscan,
// Blockscout, Otterscan) whose pages follow the common /tx/<hash> and
// /block/<number> scheme. The console links transactions and trigger
// blocks to it; nothing else reads it.

// networkExplorer reads a network's explorer: an https URL without
// credentials, query or fragment (the console appends /tx/… to it).
func (l *loader) networkExplorer(n *node, net *Network) {
	if n.isNull() {
		return
	}
	what := "network " + net.Name + ": explorer"
	s, ok := l.scalar(n, what)
	if !ok {
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || strings.ToLower(u.Scheme) != "https":
		l.errorf(n.pos, "%s %q is not an https URL (for example https://etherscan.io)", what, redact.URL(s))
	case u.User != nil:
		l.errorf(n.pos, "%s %q must not hold credentials: the console shows it to every reader", what, redact.URL(s))
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		l.errorf(n.pos, "%s %q must not have a query or fragment: rflow appends /tx/<hash> and /block/<number> to it", what, s)
	default:
		net.Explorer = strings.TrimRight(s, "/")
	}
}

// ExplorerTx is the explorer's page of transaction hash, or "" when the
// network declares no explorer.
func (n *Network) ExplorerTx(hash string) string {
	if n == nil || n.Explorer == "" || hash == "" {
		return ""
	}
	return n.Explorer + "/tx/" + url.PathEscape(hash)
}

// ExplorerBlock is the explorer's page of block number, or "".
func (n *Network) ExplorerBlock(number int64) string {
	if n == nil || n.Explorer == "" || number < 0 {
		return ""
	}
	return n.Explorer + "/block/" + strconv.FormatInt(number, 10)
}
