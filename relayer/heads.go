package relayer

import (
	"context"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// maxLooks bounds the sends whose last look is remembered; past it, the
// oldest looks (sends final, or driven by another process now) go.
const maxLooks = 10_000

// headSeen is a network's head block as last read, and when.
type headSeen struct {
	hash common.Hash
	at   time.Time
}

// lastLook is what a send's last monitor poll found: no receipt of any of
// its broadcasts and its nonce not used on chain (used, the wallet's
// mined nonce, at most the send's), with head the head read before it
// and at when it ended.
type lastLook struct {
	head       common.Hash
	broadcasts int
	used       uint64
	at         time.Time
}

// chainHead returns the hash of the network's head block and when it was
// read: one read shared by every send polling on the network, at most half
// a poll interval old, so each poll finds it read after the poll before.
func (r *Relayer) chainHead(ctx context.Context, b Backend, chainID uint64) (headSeen, error) {
	r.mu.Lock()
	h, ok := r.heads[chainID]
	r.mu.Unlock()
	if ok && time.Since(h.at) < r.cfg.PollInterval/2 {
		return h, nil
	}
	return askShared(ctx, &r.asking, fmt.Sprintf("head/%d", chainID), func() (headSeen, error) {
		at := time.Now()
		head, err := b.HeaderByNumber(ctx, nil)
		if err != nil {
			return headSeen{}, fmt.Errorf("head: %w", err)
		}
		h := headSeen{hash: head.Hash(), at: at}
		r.mu.Lock()
		r.heads[chainID] = h
		r.mu.Unlock()
		return h, nil
	})
}

// unchanged reports whether a poll of the send would find what its last
// one did, and the nonce it found used: the head, read after that poll
// ended, is the block it was before it began, and nothing was broadcast
// since. No block came, so no receipt and no use of the nonce can have
// either. A head read cached from before the poll ended proves nothing, so
// the poll looks again (at most half a poll interval later, the cache is
// read anew).
func (r *Relayer) unchanged(txID uuid.UUID, head headSeen, broadcasts int) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.looks[txID]
	if !ok || l.head != head.hash || l.broadcasts != broadcasts || !head.at.After(l.at) {
		return 0, false
	}
	return l.used, true
}

// looked remembers what a poll of the send found (see lastLook); forget
// drops it.
func (r *Relayer) looked(txID uuid.UUID, l lastLook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.looks) >= maxLooks {
		for id, old := range r.looks {
			if time.Since(old.at) > 100*r.cfg.PollInterval {
				delete(r.looks, id)
			}
		}
		if len(r.looks) >= maxLooks {
			clear(r.looks)
		}
	}
	r.looks[txID] = l
}

func (r *Relayer) forget(txID uuid.UUID) {
	r.mu.Lock()
	delete(r.looks, txID)
	delete(r.stalls, txID)
	r.mu.Unlock()
}
