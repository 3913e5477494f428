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
	// Cleanup bounds the cleanup job's cycles; zero fields take the
	// engine's defaults (jobs.DefaultLedgerCleanup*).
	Cleanup LedgerCleanup
}

// LedgerCleanup is `idempotency.cleanup`: every Every, the cleanup job
// deletes expired records in at most MaxBatches batches of Batch rows.
type LedgerCleanup struct {
	Batch      int
	MaxBatches int
	Every      time.Duration
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
	d, err := ParseDuration(s)
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
//	  cleanup: { batch: 5000, max_batches: 20, every: 1m }
func (l *loader) idempotency(n *node) {
	l.p.Idempotency = DefaultIdempotency()
	if n == nil || n.isNull() {
		return
	}
	m := l.fields(n, "idempotency", "client_retention", "deterministic_retention", "cleanup")
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
	if v := m["cleanup"]; v != nil && !v.isNull() {
		l.ledgerCleanup(v)
	}
}

// ledgerCleanup reads `idempotency.cleanup`. A batch is one DELETE holding
// its rows' locks, hence the cap; every is at least a second, or the job
// would be its own load.
func (l *loader) ledgerCleanup(n *node) {
	m := l.fields(n, "idempotency.cleanup", "batch", "max_batches", "every")
	if m == nil {
		return
	}
	c := &l.p.Idempotency.Cleanup
	if v := m["batch"]; v != nil && !v.isNull() {
		if i, ok := l.integer(v, "idempotency.cleanup.batch", 1, 100_000); ok {
			c.Batch = int(i)
		}
	}
	if v := m["max_batches"]; v != nil && !v.isNull() {
		if i, ok := l.integer(v, "idempotency.cleanup.max_batches", 1, 10_000); ok {
			c.MaxBatches = int(i)
		}
	}
	if v := m["every"]; v != nil && !v.isNull() {
		if d, ok := l.duration(v, "idempotency.cleanup.every"); ok {
			if d < time.Second {
				l.errorf(v.pos, "idempotency.cleanup.every must be at least 1s, not %s", d)
			} else {
				c.Every = d
			}
		}
	}
}
