package relayer

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Wallet is a signing key the relayer sends from. It lives only in process
// memory: the relayer stores the wallet's name and address in Postgres, never
// the key, and a Wallet formats and logs as its address only.
type Wallet struct {
	key     *ecdsa.PrivateKey
	address common.Address

	// MaxFee, when set, caps the fee per gas of every transaction the
	// wallet signs for a send, bumps included: the max fee of EIP-1559,
	// the gas price of a legacy transaction. A send's own cap
	// (Request.MaxFeePerGas, or Config.MaxFeeMultiple × its first fee)
	// applies too; the lower one wins.
	MaxFee *big.Int
	// MaxPriorityFee, when set, caps the tip (max priority fee per gas) of
	// every EIP-1559 transaction the wallet signs for a send. A send whose
	// node requires more fails saying so (see docs/relayer.md, "A node's
	// minimum price").
	MaxPriorityFee *big.Int
}

// WalletFromKey builds a wallet from a hex private key (with or without 0x),
// typically read from an environment variable by the caller. Errors never
// quote the key.
func WalletFromKey(hexKey string) (*Wallet, error) {
	hexKey = strings.TrimPrefix(strings.TrimSpace(hexKey), "0x")
	if hexKey == "" {
		return nil, errors.New("private key is empty")
	}
	key, err := crypto.HexToECDSA(hexKey)
	if err != nil {
		return nil, errors.New("private key is not a valid secp256k1 key in hex")
	}
	return &Wallet{key: key, address: crypto.PubkeyToAddress(key.PublicKey)}, nil
}

// WalletFromKeystore decrypts a go-ethereum keystore (V3 JSON) file with
// password.
func WalletFromKeystore(path, password string) (*Wallet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keystore: %w", err)
	}
	k, err := keystore.DecryptKey(b, password)
	if err != nil {
		return nil, fmt.Errorf("decrypt keystore %s: %w", path, err)
	}
	return &Wallet{key: k.PrivateKey, address: k.Address}, nil
}

// Address is the wallet's account.
func (w *Wallet) Address() common.Address { return w.address }

// String shows the address only.
func (w *Wallet) String() string { return w.address.Hex() }

// LogValue makes slog print the address only.
func (w *Wallet) LogValue() slog.Value { return slog.StringValue(w.address.Hex()) }

// sign signs tx for chainID with the latest signer (EIP-1559 or legacy with
// EIP-155 replay protection).
func (w *Wallet) sign(tx *types.Transaction, chainID uint64) (*types.Transaction, error) {
	return types.SignTx(tx, types.LatestSignerForChainID(new(big.Int).SetUint64(chainID)), w.key)
}
