package workflow

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Backoff strategies.
const (
	BackoffFixed       = "fixed"
	BackoffExponential = "exponential"
)

// Retry is a step's retry policy. Defaults (when a retry block is present):
// backoff exponential, delay 1s, max_delay 5m, jitter false, on_status
// 429 and every 5xx, on_transport_error true.
type Retry struct {
	MaxAttempts int // total attempts, including the first
	Backoff     string
	Delay       time.Duration // base delay
	MaxDelay    time.Duration
	Jitter      bool
	// OnStatus lists the HTTP statuses that are retried; nil means 429 and
	// any 5xx.
	OnStatus         []int
	OnTransportError bool
}

// BackoffDelay returns how long to wait after attempt (1-based, the attempt that
// just failed) before the next one. Exponential backoff doubles from Delay
// and is capped at MaxDelay; with Jitter the wait is drawn uniformly from
// [d/2, d].
func (r *Retry) BackoffDelay(attempt int) time.Duration {
	if r == nil {
		return 0
	}
	d := r.Delay
	if r.Backoff == BackoffExponential {
		for i := 1; i < attempt && d < r.MaxDelay; i++ {
			d *= 2
		}
	}
	if r.MaxDelay > 0 && d > r.MaxDelay {
		d = r.MaxDelay
	}
	if r.Jitter && d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	return d
}

// RetryStatus reports whether an HTTP response status is retried.
func (r *Retry) RetryStatus(code int) bool {
	if r == nil {
		return false
	}
	if r.OnStatus == nil {
		return code == 429 || (code >= 500 && code <= 599)
	}
	return slices.Contains(r.OnStatus, code)
}

// CanRetry reports whether another attempt follows attempt (1-based).
func (r *Retry) CanRetry(attempt int) bool { return r != nil && attempt < r.MaxAttempts }
