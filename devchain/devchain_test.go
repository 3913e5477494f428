package devchain_test

import (
	"bytes"
	"context"
	"math/big"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/devchain"
)

// The embedded contract must stay the test contract.
func TestEmbeddedEmitterMatchesTestdata(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Emitter.abi.json", "Emitter.bin"} {
		want, err := os.ReadFile("../testdata/contracts/" + name)
		require.NoError(t, err)
		got, err := os.ReadFile(name)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "devchain/%s differs from testdata/contracts/%s: copy it again", name, name)
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	t.Run("Simulated", func(t *testing.T) {
		t.Parallel()
		testChain(t, devchain.Options{Backend: devchain.BackendSimulated, BlockTime: 500 * time.Millisecond, EmitEvery: 300 * time.Millisecond}, 1337)
	})
	t.Run("Anvil", func(t *testing.T) {
		t.Parallel()
		bin, err := anviltest.Binary()
		if err != nil {
			t.Skip(err)
		}
		c := testChain(t, devchain.Options{Backend: devchain.BackendAnvil, Anvil: bin, EmitEvery: 300 * time.Millisecond}, 31337)
		require.NotZero(t, c.Pid)
		require.NoError(t, c.Close())
		require.ErrorIs(t, syscall.Kill(c.Pid, 0), syscall.ESRCH, "anvil still running after Close")
	})
}

// testChain starts a chain, and checks the Emitter is deployed and timed
// Deposits land as logs; after Close the RPC endpoint is gone.
func testChain(t *testing.T, opts devchain.Options, chainID int64) *devchain.Chain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	deposits := make(chan common.Hash, 100)
	opts.OnDeposit = func(tx common.Hash, amount *big.Int) {
		if amount.Sign() > 0 {
			deposits <- tx
		}
	}
	c, err := devchain.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Equal(t, chainID, c.ChainID)

	client, err := ethclient.DialContext(ctx, c.URL)
	require.NoError(t, err)
	defer client.Close()
	code, err := client.CodeAt(ctx, c.Contract, nil)
	require.NoError(t, err)
	require.NotEmpty(t, code, "no Emitter code at %s", c.Contract)
	requireFundedWallet(t, client, c.WalletKey)

	parsed, err := abi.JSON(bytes.NewReader(devchain.EmitterABI()))
	require.NoError(t, err)
	topic := parsed.Events["Deposit"].ID
	var sent []common.Hash
	for len(sent) < 3 {
		select {
		case tx := <-deposits:
			sent = append(sent, tx)
		case <-ctx.Done():
			t.Fatalf("only %d deposits emitted", len(sent))
		}
	}
	require.Eventually(t, func() bool {
		logs, err := client.FilterLogs(ctx, ethereum.FilterQuery{Addresses: []common.Address{c.Contract}, Topics: [][]common.Hash{{topic}}})
		if err != nil {
			return false
		}
		seen := map[common.Hash]bool{}
		for _, l := range logs {
			require.Equal(t, devchain.DevAddress(), common.BytesToAddress(l.Topics[1].Bytes()))
			seen[l.TxHash] = true
		}
		for _, tx := range sent {
			if !seen[tx] {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "emitted deposits never appeared as logs")

	require.NoError(t, c.Close())
	_, err = client.ChainID(ctx)
	require.Error(t, err, "the chain still answers after Close")
	return c
}

// Attach deploys on a node it did not start and leaves it running on Close.
func TestAttach(t *testing.T) {
	t.Parallel()
	if _, err := anviltest.Binary(); err != nil {
		t.Skip(err)
	}
	n := anviltest.Start(t, anviltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devchain.Attach(ctx, n.URL, devchain.Options{EmitEvery: -1})
	require.NoError(t, err)
	require.Equal(t, devchain.BackendExternal, c.Backend)
	require.EqualValues(t, anviltest.ChainID, c.ChainID)
	require.Zero(t, c.Pid)

	tx, err := c.Deposit(ctx, big.NewInt(42))
	require.NoError(t, err)
	client := n.Client()
	require.Eventually(t, func() bool {
		r, err := client.TransactionReceipt(ctx, tx)
		return err == nil && len(r.Logs) == 1 && r.Logs[0].Address == c.Contract
	}, 10*time.Second, 50*time.Millisecond)

	requireFundedWallet(t, client, c.WalletKey)

	require.NoError(t, c.Close())
	_, err = client.ChainID(ctx)
	require.NoError(t, err, "Close stopped a node it did not start")
}

// requireFundedWallet checks the session's wallet holds 100 ether.
func requireFundedWallet(t *testing.T, client *ethclient.Client, keyHex string) {
	t.Helper()
	key, err := crypto.HexToECDSA(keyHex)
	require.NoError(t, err)
	addr := crypto.PubkeyToAddress(key.PublicKey)
	require.NotEqual(t, devchain.DevAddress(), addr)
	bal, err := client.BalanceAt(context.Background(), addr, nil)
	require.NoError(t, err)
	require.Equal(t, "100000000000000000000", bal.String())
}

// The timer claims two deposits of every three, ClaimAfter later: a
// Claimed log with the deposit's amount, which a saga's wait_for matches.
func TestStartClaimsTwoDepositsOfThree(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	amounts := make(chan *big.Int, 100)
	c, err := devchain.Start(ctx, devchain.Options{Backend: devchain.BackendSimulated, BlockTime: 500 * time.Millisecond,
		EmitEvery: 300 * time.Millisecond, ClaimAfter: 300 * time.Millisecond,
		OnDeposit: func(_ common.Hash, amount *big.Int) { amounts <- amount }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var deposited []*big.Int
	for len(deposited) < 6 {
		select {
		case a := <-amounts:
			deposited = append(deposited, a)
		case <-ctx.Done():
			t.Fatalf("only %d deposits emitted", len(deposited))
		}
	}
	client, err := ethclient.DialContext(ctx, c.URL)
	require.NoError(t, err)
	defer client.Close()
	parsed, err := abi.JSON(bytes.NewReader(devchain.EmitterABI()))
	require.NoError(t, err)
	claimed := func() map[string]bool {
		logs, err := client.FilterLogs(ctx, ethereum.FilterQuery{Addresses: []common.Address{c.Contract},
			Topics: [][]common.Hash{{parsed.Events["Claimed"].ID}}})
		require.NoError(t, err)
		out := map[string]bool{}
		for _, l := range logs {
			out[new(big.Int).SetBytes(l.Data).String()] = true
		}
		return out
	}
	require.Eventually(t, func() bool {
		got := claimed()
		return got[deposited[0].String()] && got[deposited[1].String()] && got[deposited[3].String()] && got[deposited[4].String()]
	}, 30*time.Second, 200*time.Millisecond, "claims of the first deposits never appeared")
	got := claimed()
	require.False(t, got[deposited[2].String()], "the third deposit was claimed")
	require.False(t, got[deposited[5].String()], "the sixth deposit was claimed")
}
