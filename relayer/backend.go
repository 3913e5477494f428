package relayer

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Backend is the slice of a JSON-RPC node the relayer uses. The relayer
// never dials: its caller passes one per chain in Config.Networks. An
// *ethclient.Client satisfies it, and so does chain.Client.Eth(), which
// fails over along several RPC URLs (what rflow passes).
//
// A Backend that also has BlockHash (see blockHasher; chain.Eth does) is
// asked for block hashes as the node reports them; otherwise the hash of
// the header HeaderByNumber decodes is used, which is the node's on every
// chain whose headers go-ethereum encodes exactly. A Backend that also
// takes JSON-RPC batches (BatchCallContext, as chain.Eth; or an
// *ethclient.Client, through its rpc.Client) gets the first broadcasts of
// a batch of sends in one request and their receipts in another (see
// firstSend); one without sends them one call at a time.
type Backend interface {
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	BlockNumber(ctx context.Context) (uint64, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	NonceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (uint64, error)
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	SuggestGasPrice(ctx context.Context) (*big.Int, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	CallContract(ctx context.Context, msg ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
}

// blockHasher is a Backend that reports a block's hash as the node gives it,
// or ethereum.NotFound.
type blockHasher interface {
	BlockHash(ctx context.Context, number *big.Int) (common.Hash, error)
}
