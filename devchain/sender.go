package devchain

import (
	"context"
	"crypto/ecdsa"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
)

// The Emitter contract, a copy of testdata/contracts/Emitter.{abi.json,bin}
// (a test keeps them identical).
var (
	//go:embed Emitter.abi.json
	emitterABI []byte
	//go:embed Emitter.bin
	emitterBin string
)

// EmitterABI returns the Emitter contract's ABI JSON.
func EmitterABI() []byte { return append([]byte(nil), emitterABI...) }

// EmitterBin returns the Emitter contract's creation bytecode, hex without
// 0x, as solc writes it.
func EmitterBin() []byte { return []byte(strings.TrimSpace(emitterBin)) }

// sender signs and sends the dev key's transactions, one at a time, with
// locally tracked nonces.
type sender struct {
	client  *ethclient.Client
	key     *ecdsa.PrivateKey
	from    common.Address
	chainID *big.Int
	abi     abi.ABI

	mu    sync.Mutex
	nonce *uint64
}

func newSender(client *ethclient.Client, key *ecdsa.PrivateKey, chainID *big.Int) *sender {
	parsed, err := abi.JSON(strings.NewReader(string(emitterABI)))
	if err != nil {
		panic(fmt.Sprintf("embedded Emitter ABI: %v", err)) // embedded at build time
	}
	return &sender{client: client, key: key, from: crypto.PubkeyToAddress(key.PublicKey), chainID: chainID, abi: parsed}
}

// deploy creates the Emitter and waits until it is mined.
func (s *sender) deploy(ctx context.Context) (common.Address, error) {
	code, err := hex.DecodeString(strings.TrimSpace(strings.TrimPrefix(emitterBin, "0x")))
	if err != nil {
		return common.Address{}, fmt.Errorf("embedded Emitter bytecode: %w", err)
	}
	tx, err := s.send(ctx, nil, code)
	if err != nil {
		return common.Address{}, err
	}
	r, err := s.waitMined(ctx, tx, 60*time.Second)
	if err != nil {
		return common.Address{}, err
	}
	if r.Status != types.ReceiptStatusSuccessful {
		return common.Address{}, fmt.Errorf("deploy transaction %s reverted", tx.Hex())
	}
	return r.ContractAddress, nil
}

// transfer sends value to to and waits until it is mined.
func (s *sender) transfer(ctx context.Context, to common.Address, value *big.Int) error {
	tx, err := s.sendValue(ctx, &to, value, nil)
	if err != nil {
		return err
	}
	r, err := s.waitMined(ctx, tx, 60*time.Second)
	if err != nil {
		return err
	}
	if r.Status != types.ReceiptStatusSuccessful {
		return fmt.Errorf("transfer %s failed", tx.Hex())
	}
	return nil
}

// call sends a transaction calling method on to.
func (s *sender) call(ctx context.Context, to common.Address, method string, args ...any) (common.Hash, error) {
	data, err := s.abi.Pack(method, args...)
	if err != nil {
		return common.Hash{}, fmt.Errorf("encode %s: %w", method, err)
	}
	return s.send(ctx, &to, data)
}

// send signs an EIP-1559 transaction with the next nonce and sends it. A
// failed send forgets the nonce, so the next one asks the node again.
func (s *sender) send(ctx context.Context, to *common.Address, data []byte) (common.Hash, error) {
	return s.sendValue(ctx, to, nil, data)
}

func (s *sender) sendValue(ctx context.Context, to *common.Address, value *big.Int, data []byte) (common.Hash, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nonce == nil {
		n, err := s.client.PendingNonceAt(ctx, s.from)
		if err != nil {
			return common.Hash{}, fmt.Errorf("nonce of %s: %w", s.from.Hex(), err)
		}
		s.nonce = &n
	}
	head, err := s.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return common.Hash{}, fmt.Errorf("latest block: %w", err)
	}
	tip, err := s.client.SuggestGasTipCap(ctx)
	if err != nil {
		return common.Hash{}, fmt.Errorf("gas tip: %w", err)
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	gas, err := s.client.EstimateGas(ctx, ethereum.CallMsg{From: s.from, To: to, Value: value, Data: data})
	if err != nil {
		return common.Hash{}, fmt.Errorf("estimate gas: %w", err)
	}
	tx := types.NewTx(&types.DynamicFeeTx{
		ChainID: s.chainID, Nonce: *s.nonce, GasTipCap: tip, GasFeeCap: feeCap,
		Gas: gas + gas/4, To: to, Value: value, Data: data,
	})
	signed, err := types.SignTx(tx, types.LatestSignerForChainID(s.chainID), s.key)
	if err != nil {
		return common.Hash{}, fmt.Errorf("sign: %w", err)
	}
	if err := s.client.SendTransaction(ctx, signed); err != nil {
		s.nonce = nil
		return common.Hash{}, fmt.Errorf("send transaction: %w", err)
	}
	*s.nonce++
	return signed.Hash(), nil
}

// waitMined polls for tx's receipt until it appears or limit passes.
func (s *sender) waitMined(ctx context.Context, tx common.Hash, limit time.Duration) (*types.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		r, err := s.client.TransactionReceipt(ctx, tx)
		if err == nil {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("transaction %s not mined within %s: %w", tx.Hex(), limit, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
