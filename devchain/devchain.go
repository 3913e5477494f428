// Package devchain runs the local chain behind `rflow dev`: go-ethereum's
// simulated backend serving JSON-RPC on a loopback port (or anvil, when it
// is installed), with rflow's Emitter contract deployed and a Deposit event
// emitted on a timer, so event-triggered workflows have something to react
// to on a machine with nothing else running.
//
// It is a development tool: the funded key is anvil's well-known first dev
// account, and the chain lives only as long as the process.
package devchain

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
)

// Backends a Chain can run on.
const (
	// BackendAuto picks anvil when it is found (RFLOW_ANVIL, then PATH),
	// else the simulated backend.
	BackendAuto = "auto"
	// BackendSimulated is go-ethereum's in-process simulated backend.
	BackendSimulated = "simulated"
	// BackendAnvil is an anvil child process.
	BackendAnvil = "anvil"
	// BackendExternal is a node this package did not start (Attach).
	BackendExternal = "external"
)

// devKeyHex is anvil's first dev account (mnemonic "test test … junk"): a
// public, well-known key, funded by anvil and by the simulated genesis. It
// deploys the Emitter and emits the Deposits.
const devKeyHex = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

// walletFunds is what each session's wallet account is given.
var walletFunds = new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18))

// Options configure Start and Attach.
type Options struct {
	// Backend is BackendAuto (default), BackendSimulated or BackendAnvil.
	Backend string
	// Anvil is the anvil executable; empty means RFLOW_ANVIL, then PATH.
	Anvil string
	// BlockTime is how often a block is sealed (default 1s; anvil and the
	// simulated beacon count block timestamps in whole seconds).
	BlockTime time.Duration
	// EmitEvery is how often a Deposit is emitted (default 3s; negative:
	// never, e.g. when the caller emits).
	EmitEvery time.Duration
	// OnDeposit, when set, is told about every Deposit the timer sends.
	OnDeposit func(tx common.Hash, amount *big.Int)
	// ClaimAfter is how long after a timer's Deposit it is claimed
	// (Emitter.claim with the same amount, a Claimed log), for workflows
	// that wait for the claim of a deposit (examples/saga). Two deposits
	// of every three are claimed, so the third shows what a wait's timeout
	// does. Default 5s; negative: never.
	ClaimAfter time.Duration
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Backend == "" {
		o.Backend = BackendAuto
	}
	if o.BlockTime <= 0 {
		o.BlockTime = time.Second
	}
	if o.EmitEvery == 0 {
		o.EmitEvery = 3 * time.Second
	}
	if o.ClaimAfter == 0 {
		o.ClaimAfter = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Chain is a running dev chain with the Emitter contract deployed.
type Chain struct {
	// URL is the node's HTTP JSON-RPC endpoint (loopback).
	URL string
	// ChainID is the node's chain id (1337 simulated, 31337 anvil).
	ChainID int64
	// Contract is the deployed Emitter.
	Contract common.Address
	// Backend is the backend actually running (never BackendAuto).
	Backend string
	// Pid is the anvil process id, or 0 when the chain is in-process or
	// external.
	Pid int
	// WalletKey is the hex private key of an account made for this chain
	// and funded with 100 ether, for a workflow's send wallet. A fresh
	// account per session keeps a relayer's persisted nonces for an earlier
	// (gone) dev chain from ever meeting this one, and never races the
	// Deposits this package sends. It is a throwaway dev key.
	WalletKey string

	opts   Options
	client *ethclient.Client
	sender *sender
	stop   func() error // stops the node itself
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

// Start starts a dev chain on opts.Backend, deploys the Emitter, and emits
// Deposits on a timer until Close.
func Start(ctx context.Context, opts Options) (*Chain, error) {
	opts = opts.withDefaults()
	backend := opts.Backend
	if backend == BackendAuto {
		backend = BackendSimulated
		if _, err := anvilPath(opts.Anvil); err == nil {
			backend = BackendAnvil
		}
	}
	wallet, err := crypto.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("wallet key: %w", err)
	}
	var n *node
	switch backend {
	case BackendSimulated:
		n, err = startSimulated(opts.BlockTime)
	case BackendAnvil:
		n, err = startAnvil(ctx, opts.Anvil, opts.BlockTime)
	default:
		return nil, fmt.Errorf("unknown dev chain backend %q (use auto, simulated or anvil)", backend)
	}
	if err != nil {
		return nil, err
	}
	c, err := attach(ctx, n, backend, wallet, opts)
	if err != nil {
		_ = n.stop()
		return nil, err
	}
	return c, nil
}

// Attach deploys the Emitter on an existing node at url with the dev key
// (which the node must have funded, as anvil and a geth --dev node do) and
// emits Deposits on a timer until Close. Close leaves the node running.
func Attach(ctx context.Context, url string, opts Options) (*Chain, error) {
	wallet, err := crypto.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("wallet key: %w", err)
	}
	return attach(ctx, &node{url: url, stop: func() error { return nil }}, BackendExternal, wallet, opts.withDefaults())
}

// node is a started node: where it answers and how to stop it.
type node struct {
	url  string
	pid  int
	stop func() error
}

// attach deploys the Emitter on n, funds wallet from the dev key, and
// starts the Deposit timer. (The wallet is funded by a transfer, not at
// genesis, so the simulated chain's genesis, and hence block 0, is the same
// in every session.)
func attach(ctx context.Context, n *node, backend string, wallet *ecdsa.PrivateKey, opts Options) (*Chain, error) {
	client, err := ethclient.DialContext(ctx, n.url)
	if err != nil {
		return nil, fmt.Errorf("dial dev chain %s: %w", n.url, err)
	}
	id, err := client.ChainID(ctx)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("dev chain %s: chain id: %w", n.url, err)
	}
	s := newSender(client, devKey(), id)
	addr, err := s.deploy(ctx)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("deploy the Emitter contract on %s: %w", n.url, err)
	}
	if err := s.transfer(ctx, crypto.PubkeyToAddress(wallet.PublicKey), walletFunds); err != nil {
		client.Close()
		return nil, fmt.Errorf("fund the wallet account on %s: %w", n.url, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Chain{URL: n.url, ChainID: id.Int64(), Contract: addr, Backend: backend, Pid: n.pid,
		WalletKey: hex.EncodeToString(crypto.FromECDSA(wallet)),
		opts:      opts, client: client, sender: s, stop: n.stop, cancel: cancel}
	if opts.EmitEvery > 0 {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.emitLoop(runCtx) }()
	}
	opts.Logger.Info("dev chain ready", "backend", backend, "rpc", n.url, "chain_id", c.ChainID, "emitter", addr.Hex())
	return c, nil
}

// DevAddress is the dev key's address: the sender of every Deposit.
func DevAddress() common.Address { return crypto.PubkeyToAddress(devKey().PublicKey) }

func devKey() *ecdsa.PrivateKey {
	k, err := crypto.HexToECDSA(devKeyHex)
	if err != nil {
		panic(err) // a constant
	}
	return k
}

// Deposit calls Emitter.deposit(amount) and returns the transaction hash
// without waiting for it to be mined.
func (c *Chain) Deposit(ctx context.Context, amount *big.Int) (common.Hash, error) {
	return c.sender.call(ctx, c.Contract, "deposit", amount)
}

// emitLoop sends a Deposit of a random amount (0.1 to 3 ether, so some are
// "large") every EmitEvery, and claims two of every three ClaimAfter later.
// Random amounts also keep transaction hashes, and so trigger keys,
// distinct across dev sessions on a fresh chain.
func (c *Chain) emitLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.EmitEvery)
	defer t.Stop()
	var claims []pendingClaim
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		claims = c.claimDue(ctx, claims)
		milli := 100 + rand.Int64N(2900)
		amount := new(big.Int).Mul(big.NewInt(milli), big.NewInt(1e15))
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		tx, err := c.Deposit(sctx, amount)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.opts.Logger.Warn("dev chain: emit deposit", "err", err)
			}
			continue
		}
		if c.opts.OnDeposit != nil {
			c.opts.OnDeposit(tx, amount)
		}
		if c.opts.ClaimAfter > 0 && n%3 != 2 {
			claims = append(claims, pendingClaim{amount: amount, due: time.Now().Add(c.opts.ClaimAfter)})
		}
	}
}

// pendingClaim is a deposit's amount the timer claims at due.
type pendingClaim struct {
	amount *big.Int
	due    time.Time
}

// claimDue claims the pending deposits whose time has come and returns the
// others (in order: they were appended as they fell due).
func (c *Chain) claimDue(ctx context.Context, claims []pendingClaim) []pendingClaim {
	for len(claims) > 0 && !claims[0].due.After(time.Now()) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Claim(sctx, claims[0].amount)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.opts.Logger.Warn("dev chain: claim deposit", "err", err)
		}
		claims = claims[1:]
	}
	return claims
}

// Claim calls Emitter.claim(amount), which emits Claimed(dev address,
// amount), and returns the transaction hash without waiting for it to be
// mined.
func (c *Chain) Claim(ctx context.Context, amount *big.Int) (common.Hash, error) {
	return c.sender.call(ctx, c.Contract, "claim", amount)
}

// Close stops emitting and stops the node (an attached node keeps running).
// It is safe to call more than once.
func (c *Chain) Close() error {
	c.once.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.client.Close()
		c.err = c.stop()
	})
	return c.err
}

// anvilPath finds anvil: explicit, then RFLOW_ANVIL, then PATH.
func anvilPath(explicit string) (string, error) {
	for _, p := range []string{explicit, os.Getenv("RFLOW_ANVIL")} {
		if p != "" {
			return exec.LookPath(p)
		}
	}
	p, err := exec.LookPath("anvil")
	if err != nil {
		return "", errors.New("anvil not found: set RFLOW_ANVIL or put anvil on PATH")
	}
	return p, nil
}
