package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/store"
)

// Service runs chain ingestion for a set of networks and triggers: one head
// tracker per network and one task per trigger, each behind a lease, so
// several processes against one Postgres split the tasks and a dead
// process's tasks move to the others within LeaseTTL. It needs only a pool
// and a Claimer (no River).
type Service struct {
	pool    *pgxpool.Pool
	claimer Claimer
	cfg     Config
	log     *slog.Logger
	nets    map[string]*netState // by network name
	tasks   map[string]task      // by lease name (prefixed)

	// With Config.Reload (see reload.go): every network's head tracker,
	// and the generation each trigger task ingests under.
	heads   map[string]task
	fenceMu sync.Mutex
	fences  map[string]fence
}

// netState is one network's client and its window-changed signal.
type netState struct {
	cfg    Network
	client *Client
	tags   tagPoll // the head tracker's polling of the finality tags
	// recorded is the head tracker's last recorded node answer.
	recorded headRecord

	mu      sync.Mutex
	changed chan struct{}
}

// signal wakes everyone waiting on the network's window.
func (n *netState) signal() {
	n.mu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// wait returns a channel closed at the next window change. Take it before
// looking at the window, so a change in between is not missed.
func (n *netState) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

type task struct {
	run func(ctx context.Context, lease store.Lease) error
}

// NewService validates cfg and prepares RPC clients (no network I/O).
func NewService(ctx context.Context, pool *pgxpool.Pool, claimer Claimer, cfg Config, logger *slog.Logger) (*Service, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Owner == "" {
		cfg.Owner = store.ProcessID()
	}
	if cfg.LeasePrefix != "" && !strings.HasSuffix(cfg.LeasePrefix, "/") {
		cfg.LeasePrefix += "/"
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.ClaimBatch <= 0 {
		cfg.ClaimBatch = 500
	}
	s := &Service{pool: pool, claimer: claimer, cfg: cfg, log: logger.With("component", "chain"),
		nets: map[string]*netState{}, tasks: map[string]task{}}
	for _, n := range cfg.Networks {
		n = n.withDefaults()
		if _, dup := s.nets[n.Name]; dup {
			s.Close()
			return nil, fmt.Errorf("network %s declared twice", n.Name)
		}
		c, err := Dial(ctx, ClientOptions{URLs: n.RPC, WSURL: n.WS, Logger: s.log.With("network", n.Name)})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
		ns := &netState{cfg: n, client: c, changed: make(chan struct{})}
		s.nets[n.Name] = ns
		s.addTask(fmt.Sprintf("head/%d", n.ChainID), func(ctx context.Context, l store.Lease) error {
			return s.trackHead(ctx, ns, l)
		})
	}
	for _, t := range cfg.Events {
		if err := s.addEvent(t); err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, t := range cfg.Blocks {
		if err := s.addBlock(t); err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, t := range cfg.Reads {
		if err := s.addRead(t); err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, f := range cfg.Waits {
		if err := s.addWaitFeed(f); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Service) addTask(name string, run func(ctx context.Context, l store.Lease) error) {
	s.tasks[s.cfg.LeasePrefix+name] = task{run: run}
}

func (s *Service) network(name, what string) (*netState, error) {
	n, ok := s.nets[name]
	if !ok {
		return nil, fmt.Errorf("%s: unknown network %q", what, name)
	}
	return n, nil
}

// Close releases the RPC clients. Call it after Run and every Subscribe
// have returned.
func (s *Service) Close() {
	for _, n := range s.nets {
		n.client.Close()
	}
}

// Owner is this process's lease owner id.
func (s *Service) Owner() string { return s.cfg.Owner }

type running struct {
	lease  store.Lease
	cancel context.CancelFunc
	done   chan struct{}
}

// Run holds leases and runs the tasks they cover until ctx ends, then stops
// the tasks and releases the leases so another process takes over at once.
// Every LeaseTTL/3 it renews its leases and rebalances: it holds about
// tasks/live-processes leases, releasing extras and taking free or expired
// ones.
func (s *Service) Run(ctx context.Context) error {
	reloads, reloaded := s.watch(ctx)
	if reloaded != nil {
		defer func() { <-reloaded }()
	}
	names := s.taskNames()
	memberPrefix := s.cfg.LeasePrefix + "node/"
	held := map[string]*running{}
	lost := make(chan store.Lease, 64)
	var member *store.Lease

	stop := func(name string) {
		r := held[name]
		r.cancel()
		<-r.done
		delete(held, name)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for name, r := range held {
			stop(name)
			if err := store.ReleaseLease(rctx, s.pool, r.lease); err != nil {
				s.log.Warn("release lease", "lease", name, "err", err)
			}
		}
		if member != nil {
			if err := store.ReleaseLease(rctx, s.pool, *member); err != nil {
				s.log.Warn("release membership", "err", err)
			}
		}
	}()

	// membership keeps this process counted among the live ones.
	membership := func() error {
		if member == nil {
			ls, err := store.AcquireLeases(ctx, s.pool, s.cfg.Owner, []string{memberPrefix + s.cfg.Owner}, s.cfg.LeaseTTL, 1)
			if err != nil {
				return err
			}
			if len(ls) == 0 {
				return fmt.Errorf("membership lease %s is held by another process with this owner id", s.cfg.Owner)
			}
			member = &ls[0]
			return nil
		}
		l, err := store.RenewLease(ctx, s.pool, *member, s.cfg.LeaseTTL)
		if errors.Is(err, store.ErrLeaseLost) {
			member = nil
		}
		if err != nil {
			return err
		}
		member = &l
		return nil
	}

	rebalance := func() error {
		memberErr := membership()
		for name, r := range held { // renew even when membership failed
			l, err := store.RenewLease(ctx, s.pool, r.lease, s.cfg.LeaseTTL)
			if errors.Is(err, store.ErrLeaseLost) {
				s.log.Warn("lease lost; stopping task", "lease", name)
				stop(name)
				continue
			}
			if err != nil {
				return err
			}
			r.lease = l
		}
		if memberErr != nil {
			return memberErr // no rebalancing without being counted
		}
		live, err := store.LiveLeases(ctx, s.pool, memberPrefix)
		if err != nil {
			return err
		}
		fair := (len(names) + max(live, 1) - 1) / max(live, 1)
		if len(held) > fair {
			extra := len(held) - fair
			for _, name := range names {
				if r, ok := held[name]; ok && extra > 0 {
					stop(name)
					if err := store.ReleaseLease(ctx, s.pool, r.lease); err != nil {
						return err
					}
					s.log.Info("released lease to rebalance", "lease", name, "processes", live)
					extra--
				}
			}
		}
		if len(held) < fair {
			var free []string
			for _, name := range names {
				if _, ok := held[name]; !ok {
					free = append(free, name)
				}
			}
			ls, err := store.AcquireLeases(ctx, s.pool, s.cfg.Owner, free, s.cfg.LeaseTTL, fair-len(held))
			if err != nil {
				return err
			}
			for _, l := range ls {
				held[l.Name] = s.start(ctx, l, lost)
				s.log.Info("lease acquired", "lease", l.Name, "token", l.Token)
			}
		}
		return nil
	}

	tick := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		if err := rebalance(); err != nil && ctx.Err() == nil {
			s.log.Warn("lease maintenance failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case trig := <-reloads:
			s.apply(ctx, trig, held, stop, lost)
			names = s.taskNames()
		case l := <-lost:
			if r, ok := held[l.Name]; ok && r.lease.Token == l.Token {
				stop(l.Name)
			}
		}
	}
}

// start runs a task under lease until its context ends or the lease is lost;
// other errors are logged and the task restarts after a backoff.
func (s *Service) start(ctx context.Context, l store.Lease, lost chan<- store.Lease) *running {
	tctx, cancel := context.WithCancel(ctx)
	r := &running{lease: l, cancel: cancel, done: make(chan struct{})}
	t := s.tasks[l.Name]
	go func() {
		defer close(r.done)
		backoff := 200 * time.Millisecond
		for {
			err := t.run(tctx, l)
			if tctx.Err() != nil {
				return
			}
			if errors.Is(err, store.ErrLeaseLost) {
				s.log.Warn("lease lost", "lease", l.Name)
				select {
				case lost <- l:
				case <-tctx.Done():
				}
				return
			}
			s.log.Warn("chain task failed; retrying", "lease", l.Name, "err", err, "backoff", backoff)
			select {
			case <-tctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
	return r
}
