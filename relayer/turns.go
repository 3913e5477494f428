package relayer

import (
	"context"

	"github.com/ethereum/go-ethereum/common"
)

// turn lets one send of a wallet on a network at a time through the section
// from AssignNonce to eth_sendRawTransaction in this process, so the
// process hands the node a wallet's fresh sends in nonce order, as a
// client sending them one after another would. The relayer.nonces row
// lock stays what keeps nonces unique (across processes too); this only
// orders one process's broadcasts.
//
// It returns the release func, or ctx's error if ctx ends first: the
// holder's calls are all bound by its job's context, so a hung node holds
// the turn at most for that job's timeout.
func (r *Relayer) turn(ctx context.Context, from common.Address, chainID uint64) (func(), error) {
	k := walletChain{from, chainID}
	r.mu.Lock()
	t, ok := r.turns[k]
	if !ok {
		t = make(chan struct{}, 1)
		r.turns[k] = t
	}
	r.mu.Unlock()
	select {
	case t <- struct{}{}:
		return func() { <-t }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
