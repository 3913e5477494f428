package workflow

import (
	"fmt"
	"time"
)

// Retention defaults of the command ledger (the project's `idempotency:`
// block). They are documented in docs/http.md and docs/operations.md.
const (
	// DefaultClientRetention is how long a client command's recorded
	// response stays replayable.
	DefaultClientRetention = 24 * time.Hour
	// DefaultDeterministicRetention is how long the record of a
	// deterministic command (automatic scheduling, notifications,
	// cancellation) stays replayable.
	DefaultDeterministicRetention = 14 * 24 * time.Hour
	// MinDeterministicRetention is the shortest deterministic retention
	// allowed: producers of deterministic commands may redeliver for days,
	// and a shorter window would let a redelivery act twice.
	MinDeterministicRetention = 7 * 24 * time.Hour
)

// Idempotency is the command ledger's retention, from the project's
// top-level `idempotency:` block (defaults when absent).
type Idempotency struct {
	ClientRetention        time.Duration
	DeterministicRetention time.Duration
}

// DefaultIdempotency is the retention of a project without an
// `idempotency:` block.
func DefaultIdempotency() Idempotency {
	return Idempotency{ClientRetention: DefaultClientRetention, DeterministicRetention: DefaultDeterministicRetention}
}

// CheckDeterministicRetention refuses a deterministic retention under
// MinDeterministicRetention; the error names the minimum. Flags that
// override the project file use it too.
func CheckDeterministicRetention(d time.Duration) error {
	if d < MinDeterministicRetention {
		return fmt.Errorf("deterministic_retention %s is below the minimum of 7d (%s): deterministic commands "+
			"may be redelivered for days, and a shorter record would let a redelivery act twice", formatDays(d), MinDeterministicRetention)
	}
	return nil
}

// ParseRetention parses a retention as the project file writes durations
// ("24h", "90m", "14d"); it must be positive.
func ParseRetention(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

// formatDays renders whole days as "Nd" and anything else as Go does.
func formatDays(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// idempotency reads the project's `idempotency:` block:
//
//	idempotency:
//	  client_retention: 24h
//	  deterministic_retention: 14d
func (l *loader) idempotency(n *node) {
	l.p.Idempotency = DefaultIdempotency()
	if n == nil || n.isNull() {
		return
	}
	m := l.fields(n, "idempotency", "client_retention", "deterministic_retention")
	if m == nil {
		return
	}
	if v := m["client_retention"]; v != nil && !v.isNull() {
		if d, ok := l.duration(v, "idempotency.client_retention"); ok {
			l.p.Idempotency.ClientRetention = d
		}
	}
	if v := m["deterministic_retention"]; v != nil && !v.isNull() {
		if d, ok := l.duration(v, "idempotency.deterministic_retention"); ok {
			if err := CheckDeterministicRetention(d); err != nil {
				l.errorf(v.pos, "idempotency.%v", err)
			} else {
				l.p.Idempotency.DeterministicRetention = d
			}
		}
	}
}
