package chain

import (
	"context"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

// Eth is a Client in go-ethereum's ethclient shape, for code written against
// ethclient (relayer.Backend): every call goes through the Client's failover
// and retries over its URLs, and the node's own answers (a revert and its
// data, "nonce too low", ethereum.NotFound) come back exactly as ethclient
// returns them, because callers read their wording and data.
type Eth struct{ c *Client }

// Eth returns c in ethclient's shape.
func (c *Client) Eth() *Eth { return &Eth{c: c} }

// ethCall runs one ethclient call, fn(ec, ctx) in the shape of a method
// expression such as (*ethclient.Client).BlockNumber, with c's failover and
// retries.
func ethCall[T any](ctx context.Context, e *Eth, method string, fn func(*ethclient.Client, context.Context) (T, error)) (T, error) {
	var out T
	var last error
	err := e.c.do(ctx, false, method, func(ctx context.Context, rc *rpc.Client) error {
		out, last = fn(ethclient.NewClient(rc), ctx)
		return last
	})
	if err != nil && last != nil && answered(last) {
		return out, last
	}
	return out, err
}

// HeaderByNumber returns block n's header (nil: the latest).
func (e *Eth) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	return ethCall(ctx, e, "eth_getBlockByNumber", func(ec *ethclient.Client, ctx context.Context) (*types.Header, error) {
		return ec.HeaderByNumber(ctx, n)
	})
}

// BlockHash returns the hash the node gives block n, or ethereum.NotFound.
// It is the node's own hash, not one of a header go-ethereum decoded and
// encoded again, which differs on a chain whose headers carry fields
// go-ethereum does not know (the relayer's canonical-block check uses it).
func (e *Eth) BlockHash(ctx context.Context, n *big.Int) (common.Hash, error) {
	h, err := e.c.HeaderByNumber(ctx, n.Uint64())
	if errors.Is(err, ErrNotFound) {
		return common.Hash{}, ethereum.NotFound
	}
	return h.Hash, err
}

// BlockNumber returns the latest block's number.
func (e *Eth) BlockNumber(ctx context.Context) (uint64, error) {
	return ethCall(ctx, e, "eth_blockNumber", (*ethclient.Client).BlockNumber)
}

// PendingNonceAt returns account's nonce counting the node's mempool.
func (e *Eth) PendingNonceAt(ctx context.Context, account common.Address) (uint64, error) {
	return ethCall(ctx, e, "eth_getTransactionCount", func(ec *ethclient.Client, ctx context.Context) (uint64, error) {
		return ec.PendingNonceAt(ctx, account)
	})
}

// NonceAt returns account's nonce at block n (nil: the latest).
func (e *Eth) NonceAt(ctx context.Context, account common.Address, n *big.Int) (uint64, error) {
	return ethCall(ctx, e, "eth_getTransactionCount", func(ec *ethclient.Client, ctx context.Context) (uint64, error) {
		return ec.NonceAt(ctx, account, n)
	})
}

// SuggestGasPrice returns the node's legacy gas price.
func (e *Eth) SuggestGasPrice(ctx context.Context) (*big.Int, error) {
	return ethCall(ctx, e, "eth_gasPrice", (*ethclient.Client).SuggestGasPrice)
}

// SuggestGasTipCap returns the node's EIP-1559 priority fee.
func (e *Eth) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	return ethCall(ctx, e, "eth_maxPriorityFeePerGas", (*ethclient.Client).SuggestGasTipCap)
}

// EstimateGas runs eth_estimateGas of msg.
func (e *Eth) EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error) {
	return ethCall(ctx, e, "eth_estimateGas", func(ec *ethclient.Client, ctx context.Context) (uint64, error) {
		return ec.EstimateGas(ctx, msg)
	})
}

// CallContract runs eth_call of msg at block n (nil: the latest).
func (e *Eth) CallContract(ctx context.Context, msg ethereum.CallMsg, n *big.Int) ([]byte, error) {
	return ethCall(ctx, e, "eth_call", func(ec *ethclient.Client, ctx context.Context) ([]byte, error) {
		return ec.CallContract(ctx, msg, n)
	})
}

// SendTransaction broadcasts a signed transaction. Sending the same signed
// bytes again after an ambiguous failure is safe: they have one hash.
func (e *Eth) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	_, err := ethCall(ctx, e, "eth_sendRawTransaction", func(ec *ethclient.Client, ctx context.Context) (struct{}, error) {
		return struct{}{}, ec.SendTransaction(ctx, tx)
	})
	return err
}

// BalanceAt returns the balance of account at block n (nil: the latest).
func (e *Eth) BalanceAt(ctx context.Context, account common.Address, n *big.Int) (*big.Int, error) {
	return ethCall(ctx, e, "eth_getBalance", func(ec *ethclient.Client, ctx context.Context) (*big.Int, error) {
		return ec.BalanceAt(ctx, account, n)
	})
}

// TransactionReceipt returns the receipt of a mined transaction, or
// ethereum.NotFound.
func (e *Eth) TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	return ethCall(ctx, e, "eth_getTransactionReceipt", func(ec *ethclient.Client, ctx context.Context) (*types.Receipt, error) {
		return ec.TransactionReceipt(ctx, hash)
	})
}

// BatchCallContext makes several JSON-RPC calls in one request, or in as
// few as the node takes (a node that refuses a batch's size gets it again
// in smaller ones, down to single calls; see rpcbatch), with c's failover
// and retries: a transport failure sends the whole batch again (the
// relayer batches only calls safe to repeat: receipts, blocks, and
// eth_sendRawTransaction of recorded bytes). Each element's Error is the
// node's answer to it.
func (e *Eth) BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error {
	return e.c.do(ctx, false, "batch", func(ctx context.Context, rc *rpc.Client) error {
		return e.c.batches.Call(ctx, rc, batch)
	})
}
