package access

import (
	"sync"
	"time"
)

// Throttle slows password guessing at the console's login: after
// FreeFailures wrong tokens from one client, it must wait BaseDelay before
// its next try, and each further failure doubles the wait (1s, 2s, 4s, …
// up to MaxDelay); a try while waiting is refused without being checked. A right token clears the
// client's count. Create it with NewThrottle.
type Throttle struct {
	mu      sync.Mutex
	clients map[string]*failures
	now     func() time.Time
}

// Limits of Throttle.
const (
	FreeFailures = 5
	BaseDelay    = time.Second
	MaxDelay     = 5 * time.Minute
	// forgetAfter drops a client's failures after this long without one.
	forgetAfter = 15 * time.Minute
	// maxClients bounds the table: when full, the client that failed
	// longest ago is forgotten.
	maxClients = 10_000
)

type failures struct {
	count int
	last  time.Time
	until time.Time
}

// NewThrottle returns an empty throttle.
func NewThrottle() *Throttle {
	return &Throttle{clients: map[string]*failures{}, now: time.Now}
}

// Wait is how long client must still wait before its next try; zero when
// it may try now.
func (t *Throttle) Wait(client string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[client]
	if f == nil {
		return 0
	}
	now := t.now()
	if now.Sub(f.last) > forgetAfter {
		delete(t.clients, client)
		return 0
	}
	return max(0, f.until.Sub(now))
}

// Failed records a wrong token from client.
func (t *Throttle) Failed(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	f := t.clients[client]
	if f == nil || now.Sub(f.last) > forgetAfter {
		if f == nil && len(t.clients) >= maxClients {
			t.evictOldest()
		}
		f = &failures{}
		t.clients[client] = f
	}
	f.count++
	f.last = now
	if over := f.count - FreeFailures; over >= 0 {
		delay := MaxDelay
		if over < 20 {
			delay = min(MaxDelay, BaseDelay<<over)
		}
		f.until = now.Add(delay)
	}
}

// Succeeded clears client's failures.
func (t *Throttle) Succeeded(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, client)
}

func (t *Throttle) evictOldest() {
	var oldest string
	var at time.Time
	for c, f := range t.clients {
		if oldest == "" || f.last.Before(at) {
			oldest, at = c, f.last
		}
	}
	delete(t.clients, oldest)
}
