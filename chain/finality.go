package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/redact"
	"github.com/rflow-dev/rflow/store"
)

// Finality tags. A trigger phase of run_on: safe | finalized does not walk
// the window at a depth: its cursor follows the block number the node
// reports for the tag (eth_getBlockByNumber("finalized")), which the head
// tracker polls after each head change and records per chain
// (indexer.finality). A wait under confirmations: safe | finalized settles
// once its candidate is at or below that block (store.DeepWaits). The
// window and its reorg detection run as for every phase: a finalized block
// leaves the chain only through a finality violation, and that is handled
// as any reorg (cursors rewound, runs orphaned, on_reorg).

// tagsPolled are the tags the head tracker polls, in order.
var tagsPolled = []store.FinalityTag{store.TagSafe, store.TagFinalized}

// tag is the finality tag a phase follows ("" for a depth).
func (p Phase) tag() store.FinalityTag {
	switch p {
	case PhaseSafe:
		return store.TagSafe
	case PhaseFinalized:
		return store.TagFinalized
	}
	return ""
}

// tagPoll is one network's tag polling state, owned by its head tracker.
type tagPoll struct {
	polledAt string // the window head (hash) the tags were last polled at
	// lacking holds the tags the node last answered without, and until
	// which window head it is not asked for them again.
	lacking map[store.FinalityTag]int64
}

// lackingRetry is how many blocks a node that answered a tag with null or
// an error is left before it is asked again: a chain without tags costs
// one call per that many blocks, not one per head.
const lackingRetry = 64

// target is the newest block the job may read up to under a window whose
// newest block is head: head minus its depth, or its tag's block (never
// past head). ok is false while the tag was never seen.
func (j *cursorJob) target(ctx context.Context, head int64) (int64, bool, error) {
	if j.tag == "" {
		return head - int64(j.depth), true, nil
	}
	b, ok, err := store.FinalityBlock(ctx, j.s.pool, j.n.cfg.ChainID, j.tag)
	if err != nil || !ok {
		return 0, false, err
	}
	return min(head, b.Number), true, nil
}

// pollFinality records the node's safe and finalized blocks when the
// window's head moved since the last poll. A failure is logged, not
// returned: the head tracker goes on, and only the tagged phases and
// waits wait for the next poll. A node that answers without a tag (null
// or an error of its own) is logged once per outage: what follows the tag
// stops advancing until the node serves it again (never the head instead).
func (s *Service) pollFinality(ctx context.Context, n *netState, lease store.Lease) {
	if n.cfg.Finality == FinalityNone {
		return
	}
	wh, ok, err := store.WindowHead(ctx, s.pool, n.cfg.ChainID)
	if err != nil || !ok || wh.Hash == n.tags.polledAt {
		return
	}
	if n.tags.lacking == nil {
		n.tags.lacking = map[store.FinalityTag]int64{}
	}
	changed := false
	for _, tag := range tagsPolled {
		if retry, ok := n.tags.lacking[tag]; ok && wh.Number < retry {
			continue
		}
		moved, err := s.pollTag(ctx, n, lease, tag, wh)
		switch {
		case err == nil:
			if _, was := n.tags.lacking[tag]; was {
				s.log.Info("node serves the finality tag again", "network", n.cfg.Name, "tag", tag)
				delete(n.tags.lacking, tag)
			}
			changed = changed || moved
		case ctx.Err() != nil:
			return
		case lacksTag(err):
			if _, was := n.tags.lacking[tag]; !was {
				s.log.Warn("node serves no "+string(tag)+" block: run_on: "+string(tag)+" triggers and confirmations: "+
					string(tag)+" waits on this network stop advancing until it does (on a chain without finality "+
					"tags, declare finality: none and use confirmations: N)",
					"network", n.cfg.Name, "chain_id", n.cfg.ChainID, "tag", tag, "err", redact.Error(err))
			}
			n.tags.lacking[tag] = wh.Number + lackingRetry
		default:
			s.log.Warn("cannot read or record the node's finality tag; retrying", "network", n.cfg.Name,
				"tag", tag, "err", redact.Error(err))
			return
		}
	}
	n.tags.polledAt = wh.Hash
	if changed {
		n.signal()
	}
}

// pollTag asks the node for tag's block and records it, if the window
// under head wh can vouch for it. moved reports a new record.
func (s *Service) pollTag(ctx context.Context, n *netState, lease store.Lease, tag store.FinalityTag, wh store.IndexedBlock) (bool, error) {
	h, err := n.client.header(ctx, string(tag))
	if err != nil {
		return false, err
	}
	b := indexed(h)
	// Only a tag block the window holds (or one older than the window) is
	// recorded. One past the window's head cannot be checked (right after
	// a rewind the node may still name the old chain's block); one the
	// window holds under another hash is on a fork the head tracker has
	// not sorted out yet. Both wait for a later head.
	if b.Number > wh.Number {
		return false, nil
	}
	hs, err := store.BlockHashes(ctx, s.pool, n.cfg.ChainID, []int64{b.Number})
	if err != nil {
		return false, err
	}
	if w, ok := hs[b.Number]; ok && w != b.Hash {
		s.log.Debug("tag block differs from the window's; waiting for the head tracker", "network", n.cfg.Name,
			"tag", tag, "number", b.Number)
		return false, nil
	}
	var moved bool
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		moved, err = store.SetFinality(ctx, tx, lease, n.cfg.ChainID, tag, b)
		return err
	})
	return moved, err
}

// lacksTag reports whether err is the node saying it has no such tag: a
// null block or an error answer of its own (as opposed to a transport or
// rate-limit failure).
func lacksTag(err error) bool {
	return errors.Is(err, ErrNotFound) || answered(err)
}

// FinalityUse is something that needs a network's finality tag: a
// trigger's run_on or a wait's confirmations, for messages.
type FinalityUse struct {
	Network string
	Tag     store.FinalityTag
	What    string // e.g. "workflow payouts: trigger run_on: finalized"
}

// CheckFinality asks the node of each of nets (its first URL first: run
// it after CheckNetworks, which puts the answering URLs first) for each
// tag uses hold on it (both, for a network that declares finality: tags),
// before anything is deployed. A node that answers without the tag (null
// or an error of its own) never heals by itself: it is an error naming
// what needs the tag and what to change. A node that does not answer at
// all is skipped (CheckNetworks says so; the head tracker keeps asking).
func CheckFinality(ctx context.Context, nets []Network, uses []FinalityUse, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	need := map[string]map[store.FinalityTag][]string{}
	for _, u := range uses {
		if need[u.Network] == nil {
			need[u.Network] = map[store.FinalityTag][]string{}
		}
		need[u.Network][u.Tag] = append(need[u.Network][u.Tag], u.What)
	}
	var errs []error
	for _, n := range nets {
		if n.Finality == FinalityNone || len(n.RPC) == 0 || (n.Finality != FinalityTags && len(need[n.Name]) == 0) {
			continue
		}
		c, err := Dial(ctx, ClientOptions{URLs: n.RPC, Timeout: probeTimeout, Attempts: len(n.RPC),
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			logger.Warn("cannot check the node's finality tags at start; ingestion retries", "network", n.Name, "err", redact.Error(err))
			continue
		}
		errs = append(errs, checkTags(ctx, c, n, need[n.Name], logger)...)
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// checkTags is CheckFinality for network n through client c.
func checkTags(ctx context.Context, c *Client, n Network, need map[store.FinalityTag][]string, logger *slog.Logger) []error {
	var errs []error
	for _, tag := range tagsPolled {
		used := need[tag]
		if len(used) == 0 && n.Finality != FinalityTags {
			continue
		}
		h, err := c.header(ctx, string(tag))
		if ctx.Err() != nil {
			return errs
		}
		if err == nil {
			logger.Info("node serves the finality tag", "network", n.Name, "tag", tag, "block", h.Number)
			continue
		}
		if !lacksTag(err) {
			logger.Warn("cannot check the node's finality tags at start; ingestion retries", "network", n.Name,
				"tag", tag, "err", redact.Error(err))
			return errs
		}
		answer := "null"
		if !errors.Is(err, ErrNotFound) {
			answer = "an error (" + redact.Error(err).Error() + ")"
		}
		why := "workflows need it: " + strings.Join(used, "; ")
		if len(used) == 0 {
			why = "rflow.yaml declares finality: tags for the network"
		}
		errs = append(errs, fmt.Errorf("network %s: the node answers eth_getBlockByNumber(%q) with %s: it serves no "+
			"finality tags, but %s. Use confirmations: N (run_on: confirmed) on this network and declare finality: none, "+
			"or point its rpc at a node that serves the tags (Ethereum PoS, OP Stack, Arbitrum)",
			n.Name, tag, answer, why))
	}
	return errs
}

// tagMark identifies the chain's recorded tag blocks, so a wait feed that
// is caught up still delivers once they move (its tagged waits settle
// then, not at the next block).
func tagMark(ctx context.Context, db store.DBTX, chainID int64) (string, error) {
	var mark string
	for _, tag := range tagsPolled {
		b, ok, err := store.FinalityBlock(ctx, db, chainID, tag)
		if err != nil {
			return "", err
		}
		if ok {
			mark += fmt.Sprintf("%s:%d:%s ", tag, b.Number, b.Hash)
		}
	}
	return mark, nil
}
