package relayer

import (
	"context"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// nonceTrustTTL is how long after this process last raised a wallet's
// stored next nonce to the chain's pending nonce it assigns from the store
// alone, without asking the node again. A burst of sends then asks once
// per wallet and network per TTL instead of once per send; what it risks is
// only a key used outside rflow within that window, which the node refuses
// ("nonce too low", "replacement underpriced") and the monitor heals by
// moving the send to a fresh nonce, as it heals any other outside use.
const nonceTrustTTL = time.Second

// walletChain is a wallet's address on one network.
type walletChain struct {
	addr    common.Address
	chainID uint64
}

// pendingAsk is one eth_getTransactionCount(pending) in flight; the sends
// of the wallet that need it meanwhile share its answer.
type pendingAsk struct {
	done    chan struct{}
	pending uint64
	err     error
}

// chainPending is the floor for a wallet's next nonce: the chain's pending
// nonce, or 0 (the store's next nonce stands) while this process synced
// the two less than nonceTrustTTL ago. asked is when this caller asked the
// node (zero if it did not): once an assignment has taken the answer into
// account, pass it to trusted. Concurrent callers share one question.
func (r *Relayer) chainPending(ctx context.Context, b Backend, from common.Address, chainID uint64) (pending uint64, asked time.Time, err error) {
	k := walletChain{from, chainID}
	r.mu.Lock()
	if at, ok := r.synced[k]; ok && time.Since(at) < nonceTrustTTL {
		r.mu.Unlock()
		return 0, time.Time{}, nil
	}
	if q, ok := r.asking[k]; ok {
		r.mu.Unlock()
		select {
		case <-q.done:
			return q.pending, time.Time{}, q.err
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		}
	}
	q := &pendingAsk{done: make(chan struct{})}
	r.asking[k] = q
	r.mu.Unlock()
	asked = time.Now()
	q.pending, q.err = b.PendingNonceAt(ctx, from)
	if q.err != nil {
		q.err = fmt.Errorf("pending nonce: %w", q.err)
	}
	r.mu.Lock()
	delete(r.asking, k)
	r.mu.Unlock()
	close(q.done)
	if q.err != nil {
		return 0, time.Time{}, q.err
	}
	return q.pending, asked, nil
}

// trusted records that the wallet's stored next nonce is at least the
// chain's pending nonce as of at (an assignment took it into account).
func (r *Relayer) trusted(from common.Address, chainID uint64, at time.Time) {
	if at.IsZero() {
		return
	}
	r.mu.Lock()
	r.synced[walletChain{from, chainID}] = at
	r.mu.Unlock()
}

// distrust makes the next assignment for the wallet ask the node: a nonce
// error says someone else may be using the key.
func (r *Relayer) distrust(from common.Address, chainID uint64) {
	r.mu.Lock()
	delete(r.synced, walletChain{from, chainID})
	r.mu.Unlock()
}
