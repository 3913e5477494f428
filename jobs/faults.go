package jobs

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Fault points where crash tests kill the process (RFLOW_FAULT). They mark
// the windows the reliability contract talks about.
const (
	FaultAfterClaim   = "after-claim"   // a run and its first job are committed
	FaultAfterJournal = "after-journal" // a step's row is durable, its effect not yet made
	FaultAfterEffect  = "after-effect"  // the effect happened, its outcome not yet committed
	FaultMidForeach   = "mid-foreach"   // a foreach item's outcome is committed, others pending
)

// faults kills the process with SIGKILL at a named point. The spec is
// "point" or "point:n" (die on the n-th hit); several are comma-separated.
// Only tests set it.
type faults struct {
	mu     sync.Mutex
	points map[string]int
}

func parseFaults(spec string) *faults {
	f := &faults{points: map[string]int{}}
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
		f.points[name] = n
	}
	return f
}

func (f *faults) hit(point string) {
	if len(f.points) == 0 {
		return
	}
	f.mu.Lock()
	n, ok := f.points[point]
	if ok {
		n--
		f.points[point] = n
	}
	f.mu.Unlock()
	if ok && n == 0 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	}
}
