package chain

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// chainIDAt asks URL i (and only it) for its chain id, in one attempt.
func (c *Client) chainIDAt(ctx context.Context, i int) (int64, error) {
	var id hexutil.Big
	if err := c.callAt(ctx, i, &id, "eth_chainId"); err != nil {
		return 0, err
	}
	return id.ToInt().Int64(), nil
}

// callAt makes one call at URL i, in one attempt within the client's
// timeout: the checks at start must not wait out the failover backoff.
func (c *Client) callAt(ctx context.Context, i int, result any, method string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	rc, err := c.conn(ctx, i)
	if err != nil {
		return err
	}
	return rc.CallContext(ctx, result, method, args...)
}

// checkGenesis compares the node's genesis block with the one recorded for
// the chain id. A different genesis is another chain under the same id (a
// restarted dev node): nothing indexed from the old one may carry over,
// or cursors would skip the new chain's blocks.
func (s *Service) checkGenesis(ctx context.Context, n *netState, lease store.Lease) error {
	genesis, known, ok, err := s.identity(ctx, n)
	if err != nil {
		return err
	}
	switch {
	case ok && known.Genesis == genesis && known.Network == n.cfg.Name:
		return nil
	case !ok || known.Genesis == genesis:
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := store.FenceLease(ctx, tx, lease); err != nil {
				return err
			}
			return store.RecordChainIdentity(ctx, tx, store.ChainIdentity{ChainID: n.cfg.ChainID, Network: n.cfg.Name, Genesis: genesis})
		})
	}
	wh, _, err := store.WindowHead(ctx, s.pool, n.cfg.ChainID)
	if err != nil {
		return err
	}
	s.log.Warn("the node serves another chain under the same chain id (its genesis block differs); "+
		"restarting the network's triggers at their start blocks",
		"network", n.cfg.Name, "chain_id", n.cfg.ChainID, "old_genesis", known.Genesis, "genesis", genesis,
		"window_head", wh.Number)
	return s.replaceChain(ctx, n, lease, known.Genesis, genesis, wh)
}

// identity returns the genesis hash of n's node and the identity recorded
// for n's chain id (ok false: none).
func (s *Service) identity(ctx context.Context, n *netState) (genesis string, known store.ChainIdentity, ok bool, err error) {
	g, err := n.client.HeaderByNumber(ctx, 0)
	if err != nil {
		return "", known, false, fmt.Errorf("network %s: genesis: %w", n.cfg.Name, err)
	}
	known, ok, err = store.GetChainIdentity(ctx, s.pool, n.cfg.ChainID)
	return g.Hash.Hex(), known, ok, err
}

// replaceChain forgets the window and cursors of n's chain id (see
// store.ReplaceChain), fenced by the head lease, and tells OnReorg about
// the runs orphaned with the old chain.
func (s *Service) replaceChain(ctx context.Context, n *netState, lease store.Lease, oldGenesis, genesis string, wh store.IndexedBlock) error {
	id := store.ChainIdentity{ChainID: n.cfg.ChainID, Network: n.cfg.Name, Genesis: genesis}
	rec := store.ReorgRecord{Depth: int(wh.Number + 1), OldHash: oldGenesis, NewHash: genesis}
	var orphaned int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := store.FenceLease(ctx, tx, lease); err != nil {
			return err
		}
		replaced, err := store.ReplaceChain(ctx, tx, store.ChainReplacement{ID: id, OldGenesis: oldGenesis, Reorg: &rec})
		if err != nil {
			return err
		}
		orphaned = len(replaced.Orphaned)
		if s.cfg.OnReorg != nil {
			r := Reorg{ChainID: id.ChainID, ForkBlock: 0, Depth: rec.Depth, OrphanedRuns: replaced.Orphaned, OldHash: rec.OldHash, NewHash: rec.NewHash}
			if err := s.cfg.OnReorg(ctx, tx, r); err != nil {
				return fmt.Errorf("on_reorg hook: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("network %s: replace chain %d: %w", n.cfg.Name, id.ChainID, err)
	}
	s.log.Warn("chain replaced", "network", n.cfg.Name, "chain_id", id.ChainID, "orphaned_runs", orphaned)
	n.signal()
	return nil
}
