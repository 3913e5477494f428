package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// headBatch bounds the headers fetched per JSON-RPC batch.
const headBatch = 128

// trackHead keeps the network's block-hash window in step with the node:
// it polls the head every BlockPollInterval (or on a newHeads notification),
// appends new blocks whose parents link up, and handles a reorg when they do
// not. Every window write is fenced by the head lease.
func (s *Service) trackHead(ctx context.Context, n *netState, lease store.Lease) error {
	id, err := n.client.ChainID(ctx)
	if err != nil {
		return fmt.Errorf("network %s: %w", n.cfg.Name, err)
	}
	if id != n.cfg.ChainID {
		return fmt.Errorf("network %s: node reports chain id %d, configured %d", n.cfg.Name, id, n.cfg.ChainID)
	}
	if err := s.checkGenesis(ctx, n, lease); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx) // ends the newHeads follower with this attempt
	defer cancel()
	wake := n.client.SubscribeHeads(ctx)
	for {
		if err := s.pollHead(ctx, n, lease); err != nil {
			return err
		}
		s.pollFinality(ctx, n, lease)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(n.cfg.BlockPollInterval):
		}
	}
}

func indexed(h Header) store.IndexedBlock {
	return store.IndexedBlock{Number: int64(h.Number), Hash: h.Hash.Hex(), ParentHash: h.ParentHash.Hex()}
}

// pollHead makes one step towards the node's head; it returns after
// catching up at most one batch so the caller stays responsive.
func (s *Service) pollHead(ctx context.Context, n *netState, lease store.Lease) error {
	chainID, keep := n.cfg.ChainID, int64(n.cfg.Window)
	for {
		h, err := n.client.Head(ctx)
		if err != nil {
			return err
		}
		if err := s.recordHead(ctx, n, lease, h); err != nil {
			return err
		}
		wh, ok, err := store.WindowHead(ctx, s.pool, chainID)
		if err != nil {
			return err
		}
		if !ok {
			return s.seedWindow(ctx, n, lease, h)
		}
		head := int64(h.Number)
		switch {
		case head == wh.Number && h.Hash.Hex() == wh.Hash:
			return nil
		case head <= wh.Number:
			return s.handleReorg(ctx, n, lease, h, wh)
		}
		from := wh.Number + 1
		if head-wh.Number > keep {
			// Far behind (a long outage): check the window's head is still
			// canonical, then jump to the newest keep blocks.
			cur, err := n.client.HeaderByNumber(ctx, uint64(wh.Number))
			if errors.Is(err, ErrNotFound) || (err == nil && cur.Hash.Hex() != wh.Hash) {
				return s.handleReorg(ctx, n, lease, h, wh)
			}
			if err != nil {
				return err
			}
			from = head - keep + 1
		}
		to := min(head, from+headBatch-1)
		hs, err := n.client.Headers(ctx, uint64(from), uint64(to))
		if err != nil {
			return err
		}
		if len(hs) == 0 {
			return nil
		}
		if from == wh.Number+1 && hs[0].ParentHash.Hex() != wh.Hash {
			return s.handleReorg(ctx, n, lease, h, wh)
		}
		blocks := make([]store.IndexedBlock, 0, len(hs))
		for i, x := range hs {
			if i > 0 && x.ParentHash != hs[i-1].Hash {
				break // the chain changed while we read it; the next poll sorts it out
			}
			blocks = append(blocks, indexed(x))
		}
		if err := s.appendWindow(ctx, n, lease, blocks); err != nil {
			return err
		}
		if blocks[len(blocks)-1].Number >= head {
			return nil
		}
	}
}

// seedWindow fills an empty window with the newest Window blocks up to h,
// so a reorg right after the first start still finds its fork point.
func (s *Service) seedWindow(ctx context.Context, n *netState, lease store.Lease, h Header) error {
	blocks := []store.IndexedBlock{indexed(h)}
	for top := int64(h.Number) - 1; top >= 0 && top > int64(h.Number)-int64(n.cfg.Window); top -= headBatch {
		lo := max(0, top-headBatch+1, int64(h.Number)-int64(n.cfg.Window)+1)
		hs, err := n.client.Headers(ctx, uint64(lo), uint64(top))
		if err != nil {
			return err
		}
		if len(hs) < int(top-lo+1) && len(blocks) == 1 {
			// The node that answered is behind the one that gave the
			// head (a load balancer over nodes at different heights):
			// seed from the newest block it has; the tracker catches up.
			if len(hs) == 0 {
				return fmt.Errorf("network %s: node behind its own head while seeding the window; retrying", n.cfg.Name)
			}
			return s.seedWindow(ctx, n, lease, hs[len(hs)-1])
		}
		for i := len(hs) - 1; i >= 0; i-- {
			if hs[i].Hash.Hex() != blocks[0].ParentHash {
				return fmt.Errorf("network %s: chain changed while seeding the window; retrying", n.cfg.Name)
			}
			blocks = append([]store.IndexedBlock{indexed(hs[i])}, blocks...)
		}
	}
	return s.appendWindow(ctx, n, lease, blocks)
}

func (s *Service) appendWindow(ctx context.Context, n *netState, lease store.Lease, blocks []store.IndexedBlock) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := store.FenceLease(ctx, tx, lease); err != nil {
			return err
		}
		return store.AppendBlocks(ctx, tx, n.cfg.ChainID, blocks, int64(n.cfg.Window))
	})
	if err != nil {
		return fmt.Errorf("network %s: %w", n.cfg.Name, err)
	}
	n.signal()
	return nil
}

// handleReorg finds the fork point by walking the window down until the
// node's hash matches ours, then records the reorg in one transaction:
// cursors rewound, window replaced, orphaned runs marked, OnReorg called.
// If nothing in the window matches, the chain was replaced (or the reorg is
// deeper than the window): everything is treated as orphaned from block 0.
func (s *Service) handleReorg(ctx context.Context, n *netState, lease store.Lease, h Header, wh store.IndexedBlock) error {
	chainID, keep := n.cfg.ChainID, int64(n.cfg.Window)
	bottom, err := store.WindowBottom(ctx, s.pool, chainID)
	if err != nil {
		return err
	}
	window, err := store.WindowBlocks(ctx, s.pool, chainID, bottom, wh.Number)
	if err != nil {
		return err
	}
	ours := make(map[int64]string, len(window))
	for _, b := range window {
		ours[b.Number] = b.Hash
	}
	fork := int64(-1)
	for top := min(int64(h.Number), wh.Number); top >= bottom && fork < 0; top -= headBatch {
		lo := max(bottom, top-headBatch+1)
		hs, err := n.client.Headers(ctx, uint64(lo), uint64(top))
		if err != nil {
			return err
		}
		for i := len(hs) - 1; i >= 0; i-- {
			if ours[int64(hs[i].Number)] == hs[i].Hash.Hex() {
				fork = int64(hs[i].Number) + 1
				break
			}
		}
	}
	if fork > int64(h.Number) {
		// The node's head is one of our blocks: it is behind us (a lagging
		// failover URL), not on another chain. Wait for it to catch up.
		s.log.Debug("node behind the window", "network", n.cfg.Name, "node_head", h.Number, "window_head", wh.Number)
		return nil
	}
	if fork < 0 {
		// No common block: the node serves another chain (a restarted dev
		// node), or the reorg is deeper than the window.
		genesis, known, _, err := s.identity(ctx, n)
		if err != nil {
			return err
		}
		s.log.Warn("no block of the window is on the node's chain: chain replaced or reorg deeper than the window; "+
			"restarting the network's triggers at their start blocks",
			"network", n.cfg.Name, "chain_id", chainID, "old_genesis", known.Genesis, "genesis", genesis,
			"window_bottom", bottom, "window_head", wh.Number, "node_head", h.Number)
		return s.replaceChain(ctx, n, lease, known.Genesis, genesis, wh)
	}
	var canonical []store.IndexedBlock
	for from := max(fork, int64(h.Number)-keep+1); from <= int64(h.Number); from += headBatch {
		hs, err := n.client.Headers(ctx, uint64(from), uint64(min(from+headBatch-1, int64(h.Number))))
		if err != nil {
			return err
		}
		for _, x := range hs {
			b := indexed(x)
			if len(canonical) > 0 && b.ParentHash != canonical[len(canonical)-1].Hash {
				return fmt.Errorf("network %s: chain changed while reading the reorg; retrying", n.cfg.Name)
			}
			canonical = append(canonical, b)
		}
	}
	rec := store.ReorgRecord{ChainID: chainID, ForkBlock: fork, Depth: int(wh.Number - fork + 1), OldHash: ours[fork]}
	if len(canonical) > 0 && canonical[0].Number == fork {
		rec.NewHash = canonical[0].Hash
	}
	var orphaned int
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := store.FenceLease(ctx, tx, lease); err != nil {
			return err
		}
		ids, err := store.ApplyReorg(ctx, tx, rec, canonical, keep)
		if err != nil {
			return err
		}
		orphaned = len(ids)
		if s.cfg.OnReorg != nil {
			r := Reorg{ChainID: chainID, ForkBlock: fork, Depth: rec.Depth, OrphanedRuns: ids, OldHash: rec.OldHash, NewHash: rec.NewHash}
			if err := s.cfg.OnReorg(ctx, tx, r); err != nil {
				return fmt.Errorf("on_reorg hook: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("network %s: reorg at %d: %w", n.cfg.Name, fork, err)
	}
	s.log.Warn("reorg", "network", n.cfg.Name, "fork_block", fork, "depth", rec.Depth, "orphaned_runs", orphaned,
		"new_head", h.Number)
	n.signal()
	return nil
}
