package anviltest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

// RPC is a test node's JSON-RPC endpoint and the calls every node
// implementation answers alike; anvil's Node and gethtest's embed it.
// Its methods fail the test on error.
type RPC struct {
	t   testing.TB
	URL string
}

// NewRPC is the endpoint at url, for test t.
func NewRPC(t testing.TB, url string) RPC { return RPC{t: t, URL: url} }

// Client dials the node with go-ethereum's ethclient.
func (n RPC) Client() *ethclient.Client {
	n.t.Helper()
	c, err := ethclient.Dial(n.URL)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(c.Close)
	return c
}

// Call makes a raw JSON-RPC call and fails the test on error.
func (n RPC) Call(result any, method string, args ...any) {
	n.t.Helper()
	if err := n.TryCall(result, method, args...); err != nil {
		n.t.Fatalf("%s: %v", method, err)
	}
}

// TryCall makes a raw JSON-RPC call and returns its error, for tests that
// expect the node to refuse.
func (n RPC) TryCall(result any, method string, args ...any) error {
	c, err := rpc.Dial(n.URL)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.CallContext(ctx, result, method, args...)
}

// RawTx returns a transaction's signed bytes.
func (n RPC) RawTx(hash common.Hash) hexutil.Bytes {
	n.t.Helper()
	var raw hexutil.Bytes
	n.Call(&raw, "eth_getRawTransactionByHash", hash)
	return raw
}

// BlockNumber returns the current head.
func (n RPC) BlockNumber() uint64 {
	n.t.Helper()
	var b hexutil.Uint64
	n.Call(&b, "eth_blockNumber")
	return uint64(b)
}

// FreePort is a loopback TCP port nothing listens on right now.
func FreePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// DeadAddr is a loopback host:port nothing listens on: a node that is
// down, for failover tests.
func DeadAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}
