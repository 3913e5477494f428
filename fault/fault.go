// Package fault kills the process at named points, for crash tests. The
// points mark the windows the reliability contract talks about (a step's
// row durable but its effect not made, an effect made but its outcome not
// committed, …); a test names one and proves a restart loses and repeats
// nothing. Library code takes a *Set through its configuration and never
// reads the environment itself; only the command line parses Env.
package fault

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env names the environment variable that crash tests set to a spec.
const Env = "RFLOW_FAULT"

// Set is a parsed spec: the points to die at and on which hit. A nil *Set
// has no points; its Hit does nothing. It is safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	points map[string]int
}

// Parse reads a spec: "point" or "point:n" (die on the n-th hit), several
// comma-separated. An empty spec gives nil.
func Parse(spec string) *Set {
	s := &Set{points: map[string]int{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, nth, _ := strings.Cut(part, ":")
		n, err := strconv.Atoi(nth)
		if err != nil || n < 1 {
			n = 1
		}
		s.points[name] = n
	}
	if len(s.points) == 0 {
		return nil
	}
	return s
}

// Hit counts a pass through point and kills the process with SIGKILL (no
// deferred function, no flush: as a power cut would) when it is the hit the
// spec names.
func (s *Set) Hit(point string) {
	if !s.due(point) {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns
}

// due counts a pass through point and reports whether it is the one to die
// on.
func (s *Set) due(point string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.points[point]
	if !ok {
		return false
	}
	n--
	s.points[point] = n
	return n == 0
}
