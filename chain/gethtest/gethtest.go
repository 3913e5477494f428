// Package gethtest starts a real go-ethereum node (`geth --dev`) for tests,
// on a free loopback port, and stops it when the test ends. It is the second
// node implementation next to anvil: geth enforces what anvil forgives
// (eth_getLogs range limits, JSON-RPC batch limits, a txpool's minimum tip)
// and rewinds its chain on debug_setHead or after a kill -9, re-injecting the
// dropped transactions into its pool.
//
// The binary comes from RFLOW_GETH, then .tools/geth-<version>/geth in the
// module (built by `make tools` from the module proxy at go.mod's
// go-ethereum version, see Version), then PATH. Without one the test is skipped, unless RFLOW_REQUIRE_GETH=1
// (CI sets it), when it fails.
//
// The node's funded developer account pays anvil's well-known dev keys
// (anviltest.DevKeys) at start, so tests use the same keys on both nodes.
package gethtest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/rflow-dev/rflow/chain/anviltest"
)

// ChainID is the chain id of geth's developer network.
const ChainID = 1337

// Funding is what each of anviltest.DevKeys receives at start (1,000 ether).
var Funding = new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))

// Options tune the node. Zero values are geth's defaults.
type Options struct {
	// Period mines a block every interval (whole seconds; 0: a block per
	// pending transaction, as soon as it arrives).
	Period time.Duration
	// RangeLimit caps the blocks of one eth_getLogs (--rpc.rangelimit).
	RangeLimit int
	// BatchLimit caps the calls of one JSON-RPC batch
	// (--rpc.batch-request-limit).
	BatchLimit int
	// BatchResponseMax caps a batch reply's bytes
	// (--rpc.batch-response-max-size).
	BatchResponseMax int
	// PriceLimit is the txpool's minimum tip in wei (--txpool.pricelimit);
	// a transaction below it is refused with the minimum stated.
	PriceLimit int64
	// MinerGasPrice is the miner's minimum tip in wei (--miner.gasprice).
	MinerGasPrice int64
	// Port fixes the HTTP port (0 picks a free one); a restarted node keeps it.
	Port int
	// Args are passed to geth after the others.
	Args []string
}

// Node is a running geth --dev.
type Node struct {
	anviltest.RPC
	t       testing.TB
	Port    int
	DataDir string
	bin     string
	args    []string
	cmd     *exec.Cmd
	done    chan struct{}
	log     *os.File
	// tip is what the harness's own transactions pay: at least the
	// node's minimum (PriceLimit, MinerGasPrice), or geth refuses them.
	tip int64
}

// Binary returns the geth executable to use, or an error saying how to
// build it.
func Binary() (string, error) {
	if p := os.Getenv("RFLOW_GETH"); p != "" {
		return p, nil
	}
	if root, err := anviltest.ModuleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "geth-"+Version(), "geth")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("geth"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("geth not found: run `make tools` (builds github.com/ethereum/go-ethereum/cmd/geth@%s "+
		"into .tools/geth-%[1]s) or set RFLOW_GETH", Version())
}

// Version is the go-ethereum version this module builds with, read from
// its go.mod: the version of geth the tests run.
func Version() string {
	root, err := anviltest.ModuleRoot()
	if err != nil {
		return "unknown"
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(mod)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/ethereum/go-ethereum" {
			return f[1]
		}
	}
	return "unknown"
}

// Start launches geth --dev with a fresh data directory, waits until it
// answers JSON-RPC and funds anviltest.DevKeys. It is stopped when the test
// ends.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("RFLOW_REQUIRE_GETH") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	port := opts.Port
	if port == 0 {
		port = anviltest.FreePort(t)
	}
	n := &Node{RPC: anviltest.NewRPC(t, fmt.Sprintf("http://127.0.0.1:%d", port)), t: t, Port: port, DataDir: t.TempDir(), bin: bin,
		tip: max(opts.PriceLimit, opts.MinerGasPrice, 1_000_000_000)}
	n.args = n.flags(opts)
	n.start()
	t.Cleanup(n.Stop)
	n.fund()
	return n
}

func (n *Node) flags(opts Options) []string {
	args := []string{"--dev", "--datadir", n.DataDir,
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(n.Port),
		"--http.api", "eth,net,web3,debug,txpool,admin",
		"--nodiscover", "--maxpeers", "0", "--port", "0", "--authrpc.port", strconv.Itoa(anviltest.FreePort(n.t)),
		"--ipcdisable", "--verbosity", "2"}
	if opts.Period > 0 {
		args = append(args, "--dev.period", strconv.Itoa(max(1, int(opts.Period/time.Second))))
	}
	for flag, v := range map[string]int64{"--rpc.rangelimit": int64(opts.RangeLimit),
		"--rpc.batch-request-limit": int64(opts.BatchLimit), "--rpc.batch-response-max-size": int64(opts.BatchResponseMax),
		"--txpool.pricelimit": opts.PriceLimit, "--miner.gasprice": opts.MinerGasPrice} {
		if v > 0 {
			args = append(args, flag, strconv.FormatInt(v, 10))
		}
	}
	return append(args, opts.Args...)
}

func (n *Node) start() {
	n.t.Helper()
	log, err := os.OpenFile(filepath.Join(n.DataDir, "geth.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start geth: %v", err)
	}
	n.cmd, n.done, n.log = cmd, make(chan struct{}), log
	go func() { _ = cmd.Wait(); close(n.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var id hexutil.Uint64
		err := n.TryCall(&id, "eth_chainId")
		if err == nil {
			return
		}
		select {
		case <-n.done:
			n.t.Fatalf("geth exited at start; its log is %s", log.Name())
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("geth did not answer on %s: %v (log %s)", n.URL, err, log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fund pays Funding from the developer account to each of anviltest.DevKeys
// and waits until the last payment is mined.
func (n *Node) fund() {
	n.t.Helper()
	var accounts []common.Address
	n.Call(&accounts, "eth_accounts")
	if len(accounts) == 0 {
		n.t.Fatal("geth --dev has no developer account")
	}
	// Explicit nonces: geth fills a missing one from its pending state,
	// which a block sealed meanwhile can leave stale, and the next payment
	// then "replaces" the previous one ("replacement transaction
	// underpriced").
	var nonce hexutil.Uint64
	n.Call(&nonce, "eth_getTransactionCount", accounts[0], "latest")
	var last common.Hash
	for i := range anviltest.DevKeys {
		_, to := anviltest.Key(n.t, i)
		tx := n.devTx(accounts[0], to, Funding)
		tx["nonce"] = nonce + hexutil.Uint64(i)
		n.Call(&last, "eth_sendTransaction", tx)
	}
	n.WaitMined(last)
}

// devTx is a payment of the developer account at the harness's tip.
func (n *Node) devTx(from, to common.Address, value *big.Int) map[string]any {
	tip := big.NewInt(n.tip)
	return map[string]any{"from": from, "to": to, "value": (*hexutil.Big)(value),
		"maxPriorityFeePerGas": (*hexutil.Big)(tip),
		"maxFeePerGas":         (*hexutil.Big)(new(big.Int).Add(tip, big.NewInt(100_000_000_000)))}
}

// Stop kills the node with SIGKILL; the data directory stays, so Restart
// brings back what geth had persisted. Safe to call twice.
func (n *Node) Stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	_ = n.log.Close()
	n.cmd = nil
}

// Interrupt stops the node gracefully (SIGINT): geth writes its state out.
func (n *Node) Interrupt() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	_ = n.log.Close()
	n.cmd = nil
}

// Restart starts the node again on the same port and data directory (after
// Stop, a kill -9, geth rewinds to the state it had persisted).
func (n *Node) Restart() {
	n.t.Helper()
	n.Stop()
	n.start()
}

// Mine makes blocks new blocks, each holding a zero-value payment of the
// developer account to itself: geth --dev has no evm_mine.
func (n *Node) Mine(blocks int) {
	n.t.Helper()
	var accounts []common.Address
	n.Call(&accounts, "eth_accounts")
	for range blocks {
		var h common.Hash
		n.Call(&h, "eth_sendTransaction", n.devTx(accounts[0], accounts[0], new(big.Int)))
		n.WaitMined(h)
	}
}

// SetHead rewinds the chain to block number (debug_setHead). geth puts the
// transactions of the dropped blocks back in its pool, so a node mining per
// transaction re-mines them at once, in new blocks and new positions.
func (n *Node) SetHead(number uint64) {
	n.t.Helper()
	n.Call(nil, "debug_setHead", hexutil.Uint64(number))
}

// SendRaw broadcasts signed bytes and returns the node's error, if any
// (e.g. "already known" after SetHead re-injected them).
func (n *Node) SendRaw(raw []byte) error {
	var h common.Hash
	return n.TryCall(&h, "eth_sendRawTransaction", hexutil.Bytes(raw))
}

// WaitMined waits for hash's receipt and returns it.
func (n *Node) WaitMined(hash common.Hash) *types.Receipt {
	n.t.Helper()
	c, err := ethclient.Dial(n.URL)
	if err != nil {
		n.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		r, err := c.TransactionReceipt(ctx, hash)
		if err == nil {
			return r
		}
		if !errors.Is(err, ethereum.NotFound) && !IsIndexing(err) {
			n.t.Fatalf("receipt %s: %v", hash, err)
		}
		select {
		case <-ctx.Done():
			n.t.Fatalf("no receipt for %s (is geth mining?)", hash)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// IsIndexing reports geth's answer to a receipt lookup while it is still
// indexing transactions after a (re)start: not an error, ask again.
func IsIndexing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "transaction indexing is in progress")
}
