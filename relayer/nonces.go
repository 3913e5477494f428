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

// pendingAnswer is the chain's pending nonce of a wallet and when it was asked.
type pendingAnswer struct {
	pending uint64
	asked   time.Time
}

// chainPending is the floor for a wallet's next nonce: the chain's pending
// nonce, or 0 (the store's next nonce stands) while this process synced
// the two less than nonceTrustTTL ago. asked is when the node was asked
// (zero if it was not): once an assignment has taken the answer into
// account, pass it to trusted. Concurrent callers share one question.
func (r *Relayer) chainPending(ctx context.Context, b Backend, from common.Address, chainID uint64) (pending uint64, asked time.Time, err error) {
	r.mu.Lock()
	at, ok := r.synced[walletChain{from, chainID}]
	r.mu.Unlock()
	if ok && time.Since(at) < nonceTrustTTL {
		return 0, time.Time{}, nil
	}
	a, err := askShared(ctx, &r.asking, fmt.Sprintf("%s/%d", from.Hex(), chainID), func() (pendingAnswer, error) {
		asked := time.Now()
		pending, err := b.PendingNonceAt(ctx, from)
		if err != nil {
			return pendingAnswer{}, fmt.Errorf("pending nonce: %w", err)
		}
		return pendingAnswer{pending, asked}, nil
	})
	return a.pending, a.asked, err
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
