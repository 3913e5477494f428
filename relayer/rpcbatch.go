package relayer

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/rflow-dev/rflow/chain/rpcbatch"
	"github.com/rflow-dev/rflow/store"
)

// batchCaller is a Backend that takes several JSON-RPC calls in one
// request (chain.Eth does, with its failover and retries).
type batchCaller interface {
	BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error
}

// batchOf returns b's batchCaller on chain chainID: its own, or the
// rpc.Client under an *ethclient.Client itself (not a type wrapping one,
// whose own SendTransaction a batch would go around), sending in batches
// that shrink when the node refuses their size, down to single calls
// (rpcbatch; the size that worked is kept per chain); nil when b has none,
// and its calls go one at a time.
func (r *Relayer) batchOf(b Backend, chainID uint64) batchCaller {
	var bc rpcbatch.Caller
	switch c := b.(type) {
	case batchCaller:
		bc = c
	case *ethclient.Client:
		bc = c.Client()
	default:
		return nil
	}
	r.mu.Lock()
	size := r.batchSizes[chainID]
	if size == nil {
		size = new(rpcbatch.Size)
		r.batchSizes[chainID] = size
	}
	r.mu.Unlock()
	return sizedBatches{bc, size}
}

// sizedBatches sends a node's batches in sizes it takes.
type sizedBatches struct {
	c    rpcbatch.Caller
	size *rpcbatch.Size
}

func (s sizedBatches) BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error {
	return s.size.Call(ctx, s.c, batch)
}

// sendAll calls eth_sendRawTransaction for each of txs, in their order, in
// one request when b batches, and returns each call's error. Re-sending
// after an ambiguous failure is safe: the bytes are recorded and keep
// their hash.
func (r *Relayer) sendAll(ctx context.Context, b Backend, chainID uint64, txs []*types.Transaction) []error {
	errs := make([]error, len(txs))
	oneByOne := func() []error {
		for i, tx := range txs {
			errs[i] = b.SendTransaction(ctx, tx)
		}
		return errs
	}
	bc := r.batchOf(b, chainID)
	if bc == nil || len(txs) == 1 {
		return oneByOne()
	}
	elems := make([]rpc.BatchElem, len(txs))
	for i, tx := range txs {
		raw, err := tx.MarshalBinary()
		if err != nil {
			return oneByOne()
		}
		elems[i] = rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Encode(raw)}, Result: new(common.Hash)}
	}
	if err := bc.BatchCallContext(ctx, elems); err != nil {
		// The request failed whole (a provider that takes no batches,
		// say): each call alone.
		r.log.Debug("batch of sends failed; sending one by one", "sends", len(txs), "error", err)
		return oneByOne()
	}
	for i, e := range elems {
		errs[i] = e.Error
	}
	return errs
}

// look is one broadcast to find the receipt of, for its send.
type look struct {
	row *store.RelayerTx
	bc  store.RelayerBroadcast
}

// landedAll is landed for several sends with one broadcast each: each
// landing, or nil (no canonical receipt yet, or no answer). When b batches
// it asks for every receipt in one request and for the blocks they are in
// in another.
func (r *Relayer) landedAll(ctx context.Context, b Backend, chainID uint64, looks []look) []*landing {
	out := make([]*landing, len(looks))
	oneByOne := func() []*landing {
		for i, l := range looks {
			out[i], _ = r.landed(ctx, b, l.row, []store.RelayerBroadcast{l.bc})
		}
		return out
	}
	bc := r.batchOf(b, chainID)
	if bc == nil || len(looks) == 1 {
		return oneByOne()
	}
	receipts := make([]*types.Receipt, len(looks))
	elems := make([]rpc.BatchElem, len(looks))
	for i, l := range looks {
		elems[i] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{common.HexToHash(l.bc.Hash)}, Result: &receipts[i]}
	}
	if err := bc.BatchCallContext(ctx, elems); err != nil {
		return oneByOne()
	}
	var blocks []*big.Int
	var head uint64
	for i, l := range looks {
		if elems[i].Error != nil || receipts[i] == nil {
			receipts[i] = nil
			continue
		}
		blocks = append(blocks, receipts[i].BlockNumber)
		if head == 0 && l.row.Confirmations > 1 {
			// Read before the canonical check, as landed does.
			var err error
			if head, err = b.BlockNumber(ctx); err != nil {
				return out
			}
		}
	}
	if len(blocks) == 0 {
		return out
	}
	hashes, err := blockHashes(ctx, bc, blocks)
	if err != nil {
		return oneByOne()
	}
	for i, l := range looks {
		rc := receipts[i]
		if rc == nil {
			continue
		}
		if got, ok := hashes[rc.BlockNumber.Uint64()]; !ok || got != rc.BlockHash {
			r.log.Warn("receipt is in a block that is no longer canonical; not counted", "external_id", l.row.ExternalID,
				"hash", l.bc.Hash, "block", rc.BlockNumber, "block_hash", rc.BlockHash)
			continue
		}
		out[i] = &landing{bc: l.bc, rc: rc, head: head}
	}
	return out
}

// blockHashes returns the hashes the node gives the canonical blocks at
// numbers (a number it has no block at is missing), in one request.
func blockHashes(ctx context.Context, bc batchCaller, numbers []*big.Int) (map[uint64]common.Hash, error) {
	type block struct {
		Hash common.Hash `json:"hash"`
	}
	var distinct []uint64
	for _, n := range numbers {
		if !slices.Contains(distinct, n.Uint64()) {
			distinct = append(distinct, n.Uint64())
		}
	}
	elems, got := make([]rpc.BatchElem, len(distinct)), make([]*block, len(distinct))
	for i, n := range distinct {
		elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.EncodeUint64(n), false}, Result: &got[i]}
	}
	if err := bc.BatchCallContext(ctx, elems); err != nil {
		return nil, fmt.Errorf("blocks: %w", err)
	}
	out := make(map[uint64]common.Hash, len(elems))
	for i, e := range elems {
		if e.Error == nil && got[i] != nil {
			out[distinct[i]] = got[i].Hash
		}
	}
	return out, nil
}
