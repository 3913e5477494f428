package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// A log's identity is its transaction and its position in that
// transaction: a reorg can re-mine the transaction at another place in
// another block, which changes the log's block log index but not the
// receipt's logs, which are contiguous in the block. eth_getLogs does not
// say where a transaction's logs start, so the receipts of the
// transactions that emitted the logs an occurrence is made of are read:
// only those, and none for a block's first transaction (its first log is
// the block's log 0).

// Receipt batches: a block's receipts can be large, a transaction's are
// small.
const (
	blockReceiptsPerBatch = 10
	txReceiptsPerBatch    = 100
	// blockReceiptsFrom is how many transactions of one block need a look
	// up before one eth_getBlockReceipts is cheaper than their own receipts.
	blockReceiptsFrom = 8
)

// errReceiptMoved means a receipt is not of the block the log was read in:
// a reorg happened between the two reads, and the range is read again.
var errReceiptMoved = fmt.Errorf("receipt is of another block: %w", errStale)

// txKey is a transaction as mined in one block.
type txKey struct {
	block common.Hash
	tx    common.Hash
}

// TxLogIndexes returns, for each log of logs (in order), its position in its
// transaction: its index minus the block log index of the transaction's
// first log. The work is bounded by the logs' transactions: one
// eth_getTransactionReceipt per transaction that is not its block's first,
// batched, or one eth_getBlockReceipts per block where many are (and where
// the node serves it). A receipt of another block than its log's (a reorg
// in between) is an error matching errStale.
func (c *Client) TxLogIndexes(ctx context.Context, logs []types.Log) ([]uint, error) {
	first := make(map[txKey]uint)
	perBlock := make(map[common.Hash][]common.Hash)
	var blocks []common.Hash
	for _, l := range logs {
		k := txKey{l.BlockHash, l.TxHash}
		if _, ok := first[k]; ok {
			continue
		}
		if l.TxIndex == 0 {
			first[k] = 0 // the block's first transaction: its logs start the block's
			continue
		}
		first[k] = ^uint(0) // to look up
		if len(perBlock[l.BlockHash]) == 0 {
			blocks = append(blocks, l.BlockHash)
		}
		perBlock[l.BlockHash] = append(perBlock[l.BlockHash], l.TxHash)
	}
	var byBlock []common.Hash
	var byTx []txKey
	for _, b := range blocks {
		if len(perBlock[b]) >= blockReceiptsFrom && !c.noBlockReceipts.Load() {
			byBlock = append(byBlock, b)
			continue
		}
		for _, tx := range perBlock[b] {
			byTx = append(byTx, txKey{b, tx})
		}
	}
	more, err := c.blockReceipts(ctx, byBlock, first)
	if err != nil {
		return nil, err
	}
	for _, b := range more {
		for _, tx := range perBlock[b] {
			byTx = append(byTx, txKey{b, tx})
		}
	}
	if err := c.txReceipts(ctx, byTx, first); err != nil {
		return nil, err
	}
	out := make([]uint, len(logs))
	for i, l := range logs {
		f := first[txKey{l.BlockHash, l.TxHash}]
		if f == ^uint(0) {
			return nil, fmt.Errorf("log %s:%d: no receipt of its transaction in its block: %w", l.TxHash.Hex(), l.Index, errReceiptMoved)
		}
		if f > l.Index {
			return nil, fmt.Errorf("log %s:%d: its transaction's first log is %d", l.TxHash.Hex(), l.Index, f)
		}
		out[i] = l.Index - f
	}
	return out, nil
}

// blockReceipts records the first log of each transaction of blocks in
// first, with eth_getBlockReceipts by block hash. It returns the blocks
// left to look up transaction by transaction: all of them when the node
// does not serve the method (remembered for the client's life).
func (c *Client) blockReceipts(ctx context.Context, blocks []common.Hash, first map[txKey]uint) ([]common.Hash, error) {
	for i := 0; i < len(blocks); i += blockReceiptsPerBatch {
		chunk := blocks[i:min(len(blocks), i+blockReceiptsPerBatch)]
		results := make([][]*types.Receipt, len(chunk))
		batch := make([]rpc.BatchElem, len(chunk))
		for j, b := range chunk {
			batch[j] = rpc.BatchElem{Method: "eth_getBlockReceipts", Args: []any{b}, Result: &results[j]}
		}
		if err := c.receiptBatch(ctx, batch); err != nil {
			return nil, err
		}
		for j, b := range chunk {
			if err := batch[j].Error; err != nil {
				if unsupported(err) {
					c.noBlockReceipts.Store(true)
					c.log.Info("the node does not serve eth_getBlockReceipts; reading transaction receipts", "err", err)
					return blocks[i:], nil
				}
				return nil, fmt.Errorf("receipts of block %s: %w", b.Hex(), err)
			}
			if len(results[j]) == 0 {
				return nil, fmt.Errorf("receipts of block %s: none: %w", b.Hex(), errReceiptMoved)
			}
			for _, r := range results[j] {
				if err := noteFirst(r, b, first); err != nil {
					return nil, err
				}
			}
		}
	}
	return nil, nil
}

// txReceipts records the first log of each transaction of txs in first,
// with eth_getTransactionReceipt.
func (c *Client) txReceipts(ctx context.Context, txs []txKey, first map[txKey]uint) error {
	for i := 0; i < len(txs); i += txReceiptsPerBatch {
		chunk := txs[i:min(len(txs), i+txReceiptsPerBatch)]
		results := make([]*types.Receipt, len(chunk))
		batch := make([]rpc.BatchElem, len(chunk))
		for j, k := range chunk {
			batch[j] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{k.tx}, Result: &results[j]}
		}
		if err := c.receiptBatch(ctx, batch); err != nil {
			return err
		}
		for j, k := range chunk {
			if err := batch[j].Error; err != nil {
				return fmt.Errorf("receipt of %s: %w", k.tx.Hex(), err)
			}
			if results[j] == nil {
				return fmt.Errorf("receipt of %s: none: %w", k.tx.Hex(), errReceiptMoved)
			}
			if err := noteFirst(results[j], k.block, first); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteFirst records r's first log index if first asks for it.
func noteFirst(r *types.Receipt, block common.Hash, first map[txKey]uint) error {
	k := txKey{block, r.TxHash}
	if f, ok := first[k]; !ok || f != ^uint(0) {
		return nil
	}
	if r.BlockHash != block {
		return fmt.Errorf("receipt of %s in block %s, its log in %s: %w", r.TxHash.Hex(), r.BlockHash.Hex(), block.Hex(), errReceiptMoved)
	}
	if len(r.Logs) == 0 {
		return fmt.Errorf("receipt of %s has no logs: %w", r.TxHash.Hex(), errReceiptMoved)
	}
	first[k] = r.Logs[0].Index
	return nil
}

// receiptBatch sends batch with the client's failover and retries, in
// batches the node takes: one that refuses a batch's size gets it again
// smaller, down to single calls (rpcbatch, as for headers).
func (c *Client) receiptBatch(ctx context.Context, batch []rpc.BatchElem) error {
	return c.do(ctx, false, "receipts batch", func(ctx context.Context, rc *rpc.Client) error {
		return c.batches.Call(ctx, rc, batch)
	})
}

// unsupported reports whether a call's error says the node does not serve
// the method.
func unsupported(err error) bool {
	var rerr rpc.Error
	if errors.As(err, &rerr) && rerr.ErrorCode() == -32601 {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"method not found", "not supported", "unsupported", "does not exist", "not available"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
