package chain

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// Triggers is a whole set of chain triggers, as Config.Reload returns it.
// Each trigger's Generation is the workflow generation it was built from.
type Triggers struct {
	Events []EventTrigger
	Blocks []BlockTrigger
	Reads  []ReadTrigger
	// Waits are the (network, contract, event) pairs wait_for steps
	// await, each followed by a wait-only subscription; a network with one
	// keeps its head tracked.
	Waits []WaitFeed
}

// fence is the workflow generation one trigger task ingests under. Every
// transaction that advances the task's cursor checks it (see fenceTx), so
// a range read with a superseded definition is never committed, whichever
// process holds the lease and however late it reloads.
type fence struct {
	workflow   string
	generation int64
}

// fenceTx holds the workflow of the task under lease at the generation the
// task was built from, for the rest of tx (a share lock: a deploy waits for
// tx), or fails with errStale when a newer generation is deployed: the
// range is dropped, and read again once the task is rebuilt. Tasks of a
// static Config have no fence.
func (s *Service) fenceTx(ctx context.Context, tx pgx.Tx, lease string) error {
	s.fenceMu.Lock()
	f, ok := s.fences[lease]
	s.fenceMu.Unlock()
	if !ok || f.generation == 0 {
		return nil
	}
	gen, err := store.LockWorkflowGeneration(ctx, tx, f.workflow)
	if err != nil {
		return err
	}
	if gen != f.generation {
		return fmt.Errorf("%w: workflow %s is at generation %d, this task at %d", errStale, f.workflow, gen, f.generation)
	}
	return nil
}

// watch polls Config.Reload every ReloadInterval and sends each trigger set
// that differs from the last one sent (the first at once). It returns nil
// for a static Config, and a channel closed when it has stopped.
func (s *Service) watch(ctx context.Context) (<-chan Triggers, <-chan struct{}) {
	if s.cfg.Reload == nil {
		return nil, nil
	}
	// With Reload, the trigger set comes from it alone, and a network's
	// head is tracked while a trigger uses it.
	s.heads = map[string]task{}
	for name, t := range s.tasks {
		if isHead(name, s.cfg.LeasePrefix) {
			s.heads[name] = t
		}
	}
	s.tasks = map[string]task{}
	s.fences = map[string]fence{}
	interval := s.cfg.ReloadInterval
	if interval <= 0 {
		interval = time.Second
	}
	out := make(chan Triggers)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last []string
		failing := false
		for {
			trig, err := s.cfg.Reload(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				if !failing {
					s.log.Warn("cannot load the deployed chain triggers; retrying", "err", err)
				}
				failing = true
			case err == nil:
				failing = false
				if v := trig.versions(); last == nil || !slices.Equal(v, last) {
					select {
					case out <- trig:
						last = v
					case <-ctx.Done():
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	return out, done
}

// versions identifies a trigger set: each trigger's kind, workflow and
// generation, sorted.
func (t Triggers) versions() []string {
	v := []string{}
	for _, e := range t.Events {
		v = append(v, "event/"+e.Workflow+"@"+strconv.FormatInt(e.Generation, 10))
	}
	for _, b := range t.Blocks {
		v = append(v, "block/"+b.Workflow+"@"+strconv.FormatInt(b.Generation, 10))
	}
	for _, r := range t.Reads {
		v = append(v, "read/"+r.Workflow+"@"+strconv.FormatInt(r.Generation, 10))
	}
	for _, w := range t.Waits {
		v = append(v, "wait/"+w.Network+"/"+w.Address.Hex()+"/"+w.Event.Topic().Hex())
	}
	slices.Sort(v)
	return v
}

// apply makes trig the service's task set, in Run's goroutine: a task whose
// trigger is gone stops and gives its lease back; a task whose workflow has
// a new generation stops and restarts under the same lease with the new
// definition, from its cursor (the claim gate makes any overlap a no-op);
// new tasks are taken by the next rebalance. A trigger that cannot be built
// is logged and left out; the others still run.
func (s *Service) apply(ctx context.Context, trig Triggers, held map[string]*running, stop func(string), lost chan<- store.Lease) {
	tasks, fences := s.build(trig)
	changed := func(name string) bool {
		s.fenceMu.Lock()
		defer s.fenceMu.Unlock()
		return s.fences[name] != fences[name]
	}
	for name, r := range held {
		switch _, keep := tasks[name]; {
		case !keep:
			stop(name)
			if err := store.ReleaseLease(ctx, s.pool, r.lease); err != nil {
				s.log.Warn("release lease", "lease", name, "err", err)
			}
			s.log.Info("trigger removed; task stopped", "lease", name)
		case changed(name):
			// Stop the old task before its fence moves: no task ever
			// checks a generation other than the one it was built from.
			stop(name)
			s.setFence(name, fences[name], true)
			s.tasks[name] = tasks[name]
			held[name] = s.start(ctx, r.lease, lost)
			s.log.Info("trigger definition changed; task restarted", "lease", name,
				"workflow", fences[name].workflow, "generation", fences[name].generation)
		}
	}
	s.tasks = tasks
	s.fenceMu.Lock()
	s.fences = fences
	s.fenceMu.Unlock()
}

func (s *Service) setFence(name string, f fence, ok bool) {
	s.fenceMu.Lock()
	defer s.fenceMu.Unlock()
	if ok {
		s.fences[name] = f
	} else {
		delete(s.fences, name)
	}
}

// build makes the tasks of trig: one per trigger, and one head tracker per
// network a trigger uses. The add* builders write s.tasks, so it is swapped
// for a fresh map while they run (only Run's goroutine touches it).
func (s *Service) build(trig Triggers) (map[string]task, map[string]fence) {
	saved := s.tasks
	s.tasks = map[string]task{}
	defer func() { s.tasks = saved }()
	fences := map[string]fence{}
	used := map[string]bool{}
	add := func(kind, workflow, network string, gen int64, build func() error) {
		if err := build(); err != nil {
			s.log.Warn("cannot run trigger; skipped", "trigger", kind, "workflow", workflow, "generation", gen, "err", err)
			return
		}
		used[network] = true
		for name := range s.tasks {
			if _, ok := fences[name]; !ok && !isHead(name, s.cfg.LeasePrefix) {
				fences[name] = fence{workflow: workflow, generation: gen}
			}
		}
	}
	for _, t := range trig.Events {
		add("event", t.Workflow, t.Network, t.Generation, func() error { return s.addEvent(t) })
	}
	for _, t := range trig.Blocks {
		add("block", t.Workflow, t.Network, t.Generation, func() error { return s.addBlock(t) })
	}
	for _, t := range trig.Reads {
		add("read", t.Workflow, t.Network, t.Generation, func() error { return s.addRead(t) })
	}
	// Wait feeds serve every workflow awaiting their event: no generation
	// fences them (fenceTx lets an unfenced task through).
	for _, f := range trig.Waits {
		if err := s.addWaitFeed(f); err != nil {
			s.log.Warn("cannot follow an awaited event; skipped", "network", f.Network, "err", err)
			continue
		}
		used[f.Network] = true
	}
	for name, n := range s.nets {
		if head := s.cfg.LeasePrefix + "head/" + strconv.FormatInt(n.cfg.ChainID, 10); used[name] {
			s.tasks[head] = s.heads[head]
		}
	}
	return s.tasks, fences
}

// isHead reports whether a task is a network's head tracker (NewService
// names them <prefix>head/<chain id>).
func isHead(name, prefix string) bool { return strings.HasPrefix(name, prefix+"head/") }

// taskNames lists the current tasks, sorted (the order leases are taken in).
func (s *Service) taskNames() []string {
	names := make([]string, 0, len(s.tasks))
	for name := range s.tasks {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
