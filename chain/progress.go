package chain

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rflow-dev/rflow/store"
)

// recordEvery is how often the head tracker records a node answer that
// did not change the head: often enough for a readiness stall of seconds,
// rare enough to cost nothing.
const recordEvery = time.Second

// headRecord is the last node answer the head tracker wrote (only the
// network's head task touches it).
type headRecord struct {
	number uint64
	at     time.Time
}

// recordHead writes what the node answered to a head poll
// (store.RecordNodeHead), before the tracker catches up with it: a tracker
// that then fails to follow its node (a batch refused, a window write
// failing) still shows how far behind it is, and a node that stops
// answering shows as polls that stop.
func (s *Service) recordHead(ctx context.Context, n *netState, lease store.Lease, h Header) error {
	if h.Number == n.recorded.number && time.Since(n.recorded.at) < recordEvery {
		return nil
	}
	err := store.RecordNodeHead(ctx, s.pool, lease, store.NodeHead{ChainID: n.cfg.ChainID, Network: n.cfg.Name,
		Number: int64(h.Number), Time: time.Unix(int64(h.Time), 0)})
	if err != nil {
		return fmt.Errorf("network %s: %w", n.cfg.Name, err)
	}
	n.recorded = headRecord{number: h.Number, at: time.Now()}
	return nil
}

// Watched is what a readiness probe watches for one trigger set: every
// cursor task (triggers and wait feeds) and every network whose head is
// tracked because a trigger or a wait feed reads it.
type Watched struct {
	Tasks    []string
	Networks []Network
}

// Watched lists what t runs on c's networks. A trigger on a network c does
// not declare is left out (the service cannot run it either).
func (c Config) Watched(t Triggers) Watched {
	var w Watched
	used := map[string]bool{}
	network := func(name string) (Network, bool) {
		i := slices.IndexFunc(c.Networks, func(n Network) bool { return n.Name == name })
		if i < 0 {
			return Network{}, false
		}
		used[name] = true
		return c.Networks[i], true
	}
	add := func(kind, workflow, net string) {
		if _, ok := network(net); ok {
			w.Tasks = append(w.Tasks, TaskName(kind, workflow))
		}
	}
	for _, e := range t.Events {
		add("event", e.Workflow, e.Network)
	}
	for _, b := range t.Blocks {
		add("block", b.Workflow, b.Network)
	}
	for _, r := range t.Reads {
		add("read", r.Workflow, r.Network)
	}
	for _, f := range t.Waits {
		if n, ok := network(f.Network); ok && f.Event != nil {
			w.Tasks = append(w.Tasks, c.waitTask(f.key(n.ChainID)))
		}
	}
	for _, n := range c.Networks {
		if used[n.Name] {
			w.Networks = append(w.Networks, n)
		}
	}
	return w
}
