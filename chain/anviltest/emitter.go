package anviltest

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
)

// Emitter is a deployed testdata/contracts/Emitter.sol, driven by one dev
// key. Its methods fail the test on error.
type Emitter struct {
	t       testing.TB
	Address common.Address
	ABI     abi.ABI
	From    common.Address
	key     *ecdsa.PrivateKey
	client  *ethclient.Client
}

// ContractPath returns the path of a file under testdata/contracts.
func ContractPath(t testing.TB, name string) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	return filepath.Join(root, "testdata", "contracts", name)
}

// EmitterABI returns the parsed ABI of the Emitter contract.
func EmitterABI(t testing.TB) abi.ABI {
	t.Helper()
	f, err := os.Open(ContractPath(t, "Emitter.abi.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := abi.JSON(f)
	if err != nil {
		t.Fatalf("parse Emitter ABI: %v", err)
	}
	return a
}

// EmitterABIJSON returns the raw ABI JSON of the Emitter contract.
func EmitterABIJSON(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(ContractPath(t, "Emitter.abi.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Dialer is a test node that hands out clients: an anvil Node, or another
// implementation's (gethtest.Node), so one Emitter serves both.
type Dialer interface {
	Client() *ethclient.Client
}

// DeployEmitter deploys the Emitter with dev key 0 and waits for the receipt,
// so the node must be mining (automine or a block time).
func DeployEmitter(t testing.TB, n Dialer) *Emitter {
	t.Helper()
	return DeployEmitterWith(t, n, 0)
}

// DeployEmitterWith deploys the Emitter with dev key keyIndex.
func DeployEmitterWith(t testing.TB, n Dialer, keyIndex int) *Emitter {
	t.Helper()
	return Deploy(t, n, EmitterABI(t), ContractPath(t, "Emitter.bin"), keyIndex)
}

// Deploy deploys the contract with ABI a and the hex bytecode in the file
// binPath with dev key keyIndex, and waits for the receipt. The returned
// Emitter calls the contract's methods (Transact, Send) whatever it is.
func Deploy(t testing.TB, n Dialer, a abi.ABI, binPath string, keyIndex int) *Emitter {
	t.Helper()
	code, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	key, from := Key(t, keyIndex)
	e := &Emitter{t: t, ABI: a, From: from, key: key, client: n.Client()}
	rcpt := e.send(nil, common.FromHex(strings.TrimSpace(string(code))))
	if rcpt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("deploy %s: status %d", filepath.Base(binPath), rcpt.Status)
	}
	e.Address = rcpt.ContractAddress
	return e
}

// Transact calls method and waits for the receipt (the node must be mining).
func (e *Emitter) Transact(method string, args ...any) *types.Receipt {
	e.t.Helper()
	data, err := e.ABI.Pack(method, args...)
	if err != nil {
		e.t.Fatalf("pack %s: %v", method, err)
	}
	return e.send(&e.Address, data)
}

// Send calls method without waiting for a receipt (for nodes without
// automine) and returns the transaction hash.
func (e *Emitter) Send(method string, args ...any) common.Hash {
	e.t.Helper()
	data, err := e.ABI.Pack(method, args...)
	if err != nil {
		e.t.Fatalf("pack %s: %v", method, err)
	}
	return e.signed(&e.Address, data).Hash()
}

// Deposit emits one Deposit(sender, amount).
func (e *Emitter) Deposit(amount int64) *types.Receipt {
	e.t.Helper()
	return e.Transact("deposit", big.NewInt(amount))
}

// EmitMany emits n Deposit logs with amounts start … start+n-1 in one
// transaction.
func (e *Emitter) EmitMany(n, start int64) *types.Receipt {
	e.t.Helper()
	return e.Transact("emitMany", big.NewInt(n), big.NewInt(start))
}

func (e *Emitter) signed(to *common.Address, data []byte) *types.Transaction {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nonce, err := e.client.PendingNonceAt(ctx, e.From)
	if err != nil {
		e.t.Fatalf("nonce: %v", err)
	}
	tip := big.NewInt(1_000_000_000)
	head, err := e.client.HeaderByNumber(ctx, nil)
	if err != nil {
		e.t.Fatalf("head: %v", err)
	}
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	gas, err := e.client.EstimateGas(ctx, ethereum.CallMsg{From: e.From, To: to, Data: data})
	if err != nil {
		e.t.Fatalf("estimate gas: %v", err)
	}
	chainID, err := e.client.ChainID(ctx) // a node may run with Options.ChainID
	if err != nil {
		e.t.Fatalf("chain id: %v", err)
	}
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: tip,
		GasFeeCap: feeCap, Gas: gas + gas/5, To: to, Data: data})
	tx, err = types.SignTx(tx, types.LatestSignerForChainID(chainID), e.key)
	if err != nil {
		e.t.Fatalf("sign: %v", err)
	}
	if err := e.client.SendTransaction(ctx, tx); err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return tx
}

func (e *Emitter) send(to *common.Address, data []byte) *types.Receipt {
	e.t.Helper()
	tx := e.signed(to, data)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		r, err := e.client.TransactionReceipt(ctx, tx.Hash())
		if err == nil {
			return r
		}
		// geth answers "transaction indexing is in progress" for a while
		// after it starts: ask again, as for a receipt not yet there.
		if !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "indexing is in progress") {
			e.t.Fatalf("receipt %s: %v", tx.Hash(), err)
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("no receipt for %s (is the node mining?)", tx.Hash())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
