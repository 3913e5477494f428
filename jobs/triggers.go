package jobs

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/workflow"
)

// ChainConfig maps the project's networks and its event, block and read
// triggers onto the chain service, which claims through this engine. Each
// trigger's where:/when: expression filters before claiming.
func (e *Engine) ChainConfig() (chain.Config, error) {
	p := e.project
	cfg := chain.Config{LeasePrefix: p.Name, OnReorg: e.onReorg}
	used := map[string]bool{}
	for _, wf := range p.Workflows {
		t := wf.Trigger
		switch {
		case t.Event != nil:
			c := p.Contract(t.Event.Contract)
			if c == nil {
				return cfg, fmt.Errorf("workflow %s: unknown contract %s", wf.Name, t.Event.Contract)
			}
			ev, err := chain.NewEvent(*c.ABI, t.Event.Event)
			if err != nil {
				return cfg, fmt.Errorf("workflow %s: %w", wf.Name, err)
			}
			et := chain.EventTrigger{
				Workflow: wf.Name, Network: c.Network, Addresses: nonZero(c), Event: ev,
				StartBlock: c.StartBlock, Confirmations: t.Event.Confirmations, RunOn: chain.RunOn(t.Event.RunOn),
			}
			if where := t.Event.Where; where != nil {
				et.Where = func(event map[string]any) (bool, error) {
					// Normalised as a journaled payload reads back, so a
					// condition sees the same values before and after a crash.
					v, err := workflow.Normalize(event)
					if err != nil {
						return false, err
					}
					return where.Bool(workflow.Env{"event": v, "env": e.envVars})
				}
			}
			cfg.Events = append(cfg.Events, et)
			used[c.Network] = true
		case t.Block != nil:
			cfg.Blocks = append(cfg.Blocks, chain.BlockTrigger{Workflow: wf.Name, Network: t.Block.Network, Every: t.Block.Every})
			used[t.Block.Network] = true
		case t.Read != nil:
			c := p.Contract(t.Read.Contract)
			if c == nil || t.Read.ABIMethod == nil {
				return cfg, fmt.Errorf("workflow %s: unknown contract function %s.%s", wf.Name, t.Read.Contract, t.Read.Function)
			}
			// Arguments see only env; they are encoded once, as the ABI wants them.
			data, err := t.Read.Calldata(workflow.Env{"env": e.envVars})
			if err != nil {
				return cfg, fmt.Errorf("workflow %s: read arguments: %w", wf.Name, err)
			}
			rt := chain.ReadTrigger{Workflow: wf.Name, Network: c.Network, Address: c.Address, Method: *t.Read.ABIMethod,
				Calldata: data, EveryBlocks: t.Read.EveryBlocks, Interval: t.Read.Every}
			if when := t.Read.When; when != nil {
				rt.When = func(result any) (bool, error) {
					v, err := workflow.Normalize(result)
					if err != nil {
						return false, err
					}
					return when.Bool(workflow.Env{"result": v, "env": e.envVars})
				}
			}
			cfg.Reads = append(cfg.Reads, rt)
			used[c.Network] = true
		}
	}
	for _, n := range p.Networks {
		if !used[n.Name] {
			continue
		}
		cfg.Networks = append(cfg.Networks, chain.Network{
			Name: n.Name, ChainID: int64(n.ChainID), RPC: n.RPC, WS: n.WS, Confirmations: n.Confirmations,
			BlockPollInterval: n.BlockPollInterval, MaxBlockRange: n.MaxBlockRange,
		})
	}
	return cfg, nil
}

// onReorg records the orphaned runs; the chain service has already marked
// them (orphaned_at) in the same transaction. Compensation (on_reorg:) is
// a later capability; the marks are what it will start from.
func (e *Engine) onReorg(ctx context.Context, tx pgx.Tx, r chain.Reorg) error {
	e.logger.Warn("reorg", "chain_id", r.ChainID, "fork_block", r.ForkBlock, "depth", r.Depth, "orphaned_runs", len(r.OrphanedRuns))
	return nil
}

func nonZero(c *workflow.Contract) []common.Address {
	if c.Address == (common.Address{}) {
		return nil
	}
	return []common.Address{c.Address}
}
