// Package anviltest starts a real anvil node for tests, on a free loopback
// port, and stops it when the test ends. The binary comes from RFLOW_ANVIL,
// then .tools/node_modules/.bin/anvil in the module (installed by `make
// tools`), then PATH.
package anviltest

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// ChainID is the chain id every test node uses.
const ChainID = 31337

// DevKeys are anvil's well-known funded development keys (from its default
// mnemonic). They hold test ether only.
var DevKeys = []string{
	"ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
	"59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
	"5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
	"7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
	"47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
}

// Node is a running anvil.
type Node struct {
	RPC
	t    testing.TB
	Port int
	cmd  *exec.Cmd
	args []string
	bin  string
	done chan struct{}
}

// Options tune the node.
type Options struct {
	// NoMining starts with automine off (blocks only via Mine).
	NoMining bool
	// BlockTime mines a block every interval (0: automine per transaction).
	BlockTime time.Duration
	// Port fixes the port (0 picks a free one); a restarted node keeps it.
	Port int
	// ChainID overrides the chain id (default ChainID).
	ChainID int64
	// Timestamp fixes the genesis block's timestamp (0: now), and so its
	// hash: two nodes with different timestamps serve different chains.
	Timestamp uint64
}

// Binary returns the anvil executable to use, or an error saying how to
// install it.
func Binary() (string, error) {
	if p := os.Getenv("RFLOW_ANVIL"); p != "" {
		return p, nil
	}
	if root, err := ModuleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "node_modules", ".bin", "anvil")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("anvil"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("anvil not found: run `make tools` (npm @foundry-rs/anvil-linux-amd64@1.7.1) or set RFLOW_ANVIL")
}

// ModuleRoot is the directory of the module's go.mod, above the working
// directory of a test; tools installed by `make tools` live under it.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Start launches anvil and waits until it answers JSON-RPC. It is stopped
// when the test ends.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	port := opts.Port
	if port == 0 {
		port = FreePort(t)
	}
	chainID := opts.ChainID
	if chainID == 0 {
		chainID = ChainID
	}
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--chain-id", strconv.FormatInt(chainID, 10),
		"--accounts", "10", "--silent"}
	if opts.Timestamp > 0 {
		args = append(args, "--timestamp", strconv.FormatUint(opts.Timestamp, 10))
	}
	if opts.NoMining {
		args = append(args, "--no-mining")
	}
	if opts.BlockTime > 0 {
		args = append(args, "--block-time", strconv.FormatFloat(opts.BlockTime.Seconds(), 'f', -1, 64))
	}
	n := &Node{RPC: NewRPC(t, fmt.Sprintf("http://127.0.0.1:%d", port)), t: t, Port: port, args: args, bin: bin}
	n.start()
	t.Cleanup(n.Stop)
	return n
}

func (n *Node) start() {
	n.t.Helper()
	cmd := exec.Command(n.bin, n.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start anvil: %v", err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(n.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var id hexutil.Uint64
		err := n.TryCall(&id, "eth_chainId")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("anvil did not answer on %s: %v", n.URL, err)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// Stop kills the node (state is lost). Safe to call twice.
func (n *Node) Stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

// Restart stops the node and starts a fresh one (empty chain) on the same port.
func (n *Node) Restart() {
	n.Stop()
	n.start()
}

// Mine mines blocks blocks.
func (n *Node) Mine(blocks int) {
	n.t.Helper()
	n.Call(nil, "anvil_mine", hexutil.Uint64(blocks))
}

// SetAutomine turns automine on or off.
func (n *Node) SetAutomine(on bool) {
	n.t.Helper()
	n.Call(nil, "evm_setAutomine", on)
}

// Reorg replaces the newest depth blocks with new empty ones (anvil_reorg).
func (n *Node) Reorg(depth int) {
	n.t.Helper()
	n.Call(nil, "anvil_reorg", depth, []any{})
}

// ReorgTx is a signed transaction for ReorgWith: Raw goes into the new
// block at offset Block (0 is the first new block).
type ReorgTx struct {
	Raw   []byte
	Block int
}

// ReorgWith replaces the newest depth blocks with new ones holding txs
// (anvil_reorg). Transactions of the replaced blocks that are not among txs
// are gone: anvil puts none of them back in its mempool.
func (n *Node) ReorgWith(depth int, txs ...ReorgTx) {
	n.t.Helper()
	list := make([]any, len(txs))
	for i, tx := range txs {
		list[i] = []any{hexutil.Bytes(tx.Raw), tx.Block}
	}
	n.Call(nil, "anvil_reorg", depth, list)
}

// Key returns dev key i and its address.
func Key(t testing.TB, i int) (*ecdsa.PrivateKey, common.Address) {
	t.Helper()
	k, err := crypto.HexToECDSA(DevKeys[i])
	if err != nil {
		t.Fatal(err)
	}
	return k, crypto.PubkeyToAddress(k.PublicKey)
}

// TxLogIndex returns l's position in its transaction (what rflow keys an
// event occurrence by, chain.EventKey), from the transaction's receipt.
func (n *Node) TxLogIndex(l types.Log) uint {
	n.t.Helper()
	r, err := n.Client().TransactionReceipt(context.Background(), l.TxHash)
	if err != nil {
		n.t.Fatalf("receipt %s: %v", l.TxHash.Hex(), err)
	}
	return l.Index - r.Logs[0].Index
}
