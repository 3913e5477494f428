package chain

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/rflow-dev/rflow/redact"
)

// maxRetryAfter bounds how long a provider's Retry-After is honoured: a
// longer one (or a date far off) is read as this.
const maxRetryAfter = time.Minute

// retryAfter is a Client's HTTP transport that remembers, per host, when a
// node that answered 429 Too Many Requests or 503 with a Retry-After asked
// to be called again. The Client waits until then before its next call to
// that URL (see Client.do) instead of retrying at its own pace, which a
// rate-limiting provider counts against it.
type retryAfter struct {
	next http.RoundTripper

	mu    sync.Mutex
	until map[string]time.Time
}

func (t *retryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		t.mu.Lock()
		t.until[req.URL.Host] = time.Now().Add(d)
		t.mu.Unlock()
	}
	return resp, nil
}

// pause is how long the node at host asked not to be called.
func (t *retryAfter) pause(host string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := time.Until(t.until[host])
	if d <= 0 {
		delete(t.until, host)
		return 0
	}
	return d
}

// parseRetryAfter reads a Retry-After value: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return min(time.Duration(min(s, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}

// waitRetryAfter waits out the pause URL i's node asked for, if any.
func (c *Client) waitRetryAfter(ctx context.Context, i int) error {
	u, err := url.Parse(c.opts.URLs[i])
	if err != nil {
		return nil
	}
	d := c.throttle.pause(u.Host)
	if d <= 0 {
		return nil
	}
	c.log.Debug("node asked to retry later; waiting", "url", redact.URL(c.opts.URLs[i]), "wait", d)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
