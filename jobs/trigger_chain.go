package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/ethereum/go-ethereum/common"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

// ChainConfig maps the project's networks onto the chain service, which
// claims through this engine. Its triggers are not the project file's: they
// are built from the deployed workflows' current generations, and reloaded
// while the service runs, so a definition deployed through the API or by
// another process starts (or stops, or changes) ingesting within about a
// second, without a restart.
func (e *Engine) ChainConfig() chain.Config {
	p := e.project
	src := &triggerSource{e: e}
	return chain.Config{LeasePrefix: p.Name, OnReorg: e.onReorg, Reload: src.load, Matcher: e, Networks: ChainNetworks(p)}
}

// ChainNetworks maps the project's networks to the chain package's.
func ChainNetworks(p *workflow.Project) []chain.Network {
	var out []chain.Network
	for _, n := range p.Networks {
		out = append(out, chain.Network{
			Name: n.Name, ChainID: int64(n.ChainID), RPC: n.RPC, WS: n.WS, Confirmations: n.Confirmations,
			BlockPollInterval: n.BlockPollInterval, MaxBlockRange: n.MaxBlockRange, Finality: chain.Finality(n.Finality),
		})
	}
	return out
}

// triggerSource builds the chain triggers of the deployed generations. It
// rebuilds only when a generation changed; a generation this project cannot
// compile or map (say, one naming a contract this process's file lacks) is
// logged once and left out, for a process whose file has it.
type triggerSource struct {
	e    *Engine
	mu   sync.Mutex
	gens map[string]int64
	trig chain.Triggers
}

func (s *triggerSource) load(ctx context.Context) (chain.Triggers, error) {
	gens, err := store.WorkflowGenerations(ctx, s.e.pool)
	if err != nil {
		return chain.Triggers{}, err
	}
	// Live waits keep their feeds followed whatever is deployed now (a
	// run parked under an older generation).
	live, err := store.LiveWaitSteps(ctx, s.e.pool)
	if err != nil {
		return chain.Triggers{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gens == nil || !maps.Equal(gens, s.gens) {
		// A workflow a project file deployed that this process's file no
		// longer has runs no trigger here (rflow workflows deploy
		// retires it).
		missing, err := s.e.missingFromFile(ctx, slices.Collect(maps.Keys(gens)))
		if err != nil {
			return chain.Triggers{}, err
		}
		built := maps.Clone(gens)
		maps.DeleteFunc(built, func(name string, _ int64) bool { return missing[name] })
		trig, err := s.build(ctx, built)
		if err != nil {
			return chain.Triggers{}, err
		}
		s.gens, s.trig = gens, trig
	}
	trig := s.trig
	trig.Waits = slices.Clone(trig.Waits)
	for _, ws := range live {
		p, err := s.e.plan(ctx, s.e.pool, ws.Workflow, ws.Generation)
		if err != nil {
			s.e.logger.Warn("cannot follow the event a parked wait awaits", "workflow", ws.Workflow, "generation", ws.Generation,
				"step", ws.StepID, "err", err)
			continue
		}
		if n := p.nodes[ws.StepID]; n != nil {
			trig.Waits = s.e.addWaitFeed(trig.Waits, n.step)
		}
	}
	return trig, nil
}

// build maps the deployed generations gens to chain triggers and the wait
// feeds their wait_for steps need.
func (s *triggerSource) build(ctx context.Context, gens map[string]int64) (chain.Triggers, error) {
	var trig chain.Triggers
	for _, name := range slices.Sorted(maps.Keys(gens)) {
		p, err := s.e.plan(ctx, s.e.pool, name, gens[name])
		var uc *uncompiledError
		if errors.As(err, &uc) {
			s.e.warnUncompiled(uc)
			continue
		}
		if err != nil {
			return chain.Triggers{}, err
		}
		if err := s.e.addChainTrigger(&trig, p.wf, gens[name]); err != nil {
			s.e.logger.Warn("cannot map a chain trigger; it does not run here", "workflow", name, "generation", gens[name], "err", err)
		}
		for _, id := range slices.Sorted(maps.Keys(p.nodes)) {
			trig.Waits = s.e.addWaitFeed(trig.Waits, p.nodes[id].step)
		}
	}
	return trig, nil
}

// addWaitFeed adds the feed a wait_for step s listens on to feeds, unless
// it is there already (or s is no wait_for).
func (e *Engine) addWaitFeed(feeds []chain.WaitFeed, s *workflow.Step) []chain.WaitFeed {
	if s.WaitFor == nil || s.WaitFor.Event == nil {
		return feeds
	}
	c := e.project.Contract(s.WaitFor.Event.Contract)
	if c == nil {
		return feeds
	}
	ev, err := chain.NewEvent(*c.ABI, s.WaitFor.Event.Event)
	if err != nil {
		e.logger.Warn("cannot follow an awaited event", "step", s.ID, "err", err)
		return feeds
	}
	for _, f := range feeds {
		if f.Network == c.Network && f.Address == c.Address && f.Event.Topic() == ev.Topic() {
			return feeds
		}
	}
	return append(feeds, chain.WaitFeed{Network: c.Network, Address: c.Address, Event: ev})
}

// addChainTrigger appends wf's event, block or read trigger to trig. Each
// trigger's where:/when: expression filters before claiming.
func (e *Engine) addChainTrigger(trig *chain.Triggers, wf *workflow.Workflow, generation int64) error {
	p := e.project
	t := wf.Trigger
	switch {
	case t.Event != nil:
		c := p.Contract(t.Event.Contract)
		if c == nil {
			return fmt.Errorf("workflow %s: unknown contract %s", wf.Name, t.Event.Contract)
		}
		ev, err := chain.NewEvent(*c.ABI, t.Event.Event)
		if err != nil {
			return fmt.Errorf("workflow %s: %w", wf.Name, err)
		}
		et := chain.EventTrigger{
			Workflow: wf.Name, Network: c.Network, Addresses: nonZero(c), Event: ev, Generation: generation,
			StartBlock: c.StartBlock, Confirmations: t.Event.Confirmations, RunOn: chain.RunOn(t.Event.RunOn),
		}
		if t.Event.Where != nil {
			et.Where = e.where(t.Event.Where)
		}
		trig.Events = append(trig.Events, et)
	case t.Block != nil:
		trig.Blocks = append(trig.Blocks, chain.BlockTrigger{Workflow: wf.Name, Network: t.Block.Network, Every: t.Block.Every,
			RunOn: chain.RunOn(t.Block.RunOn), Generation: generation})
	case t.Read != nil:
		c := p.Contract(t.Read.Contract)
		if c == nil || t.Read.ABIMethod == nil {
			return fmt.Errorf("workflow %s: unknown contract function %s.%s", wf.Name, t.Read.Contract, t.Read.Function)
		}
		// Arguments see only env; they are encoded once, as the ABI wants them.
		data, err := t.Read.Calldata(workflow.Env{"env": e.envVars})
		if err != nil {
			return fmt.Errorf("workflow %s: read arguments: %w", wf.Name, err)
		}
		rt := chain.ReadTrigger{Workflow: wf.Name, Network: c.Network, Address: c.Address, Method: *t.Read.ABIMethod,
			Calldata: data, EveryBlocks: t.Read.EveryBlocks, Interval: t.Read.Every, Generation: generation}
		if t.Read.When != nil {
			rt.When = e.when(t.Read.When)
		}
		trig.Reads = append(trig.Reads, rt)
	}
	return nil
}

func nonZero(c *workflow.Contract) []common.Address {
	if c.Address == (common.Address{}) {
		return nil
	}
	return []common.Address{c.Address}
}
