package devchain

import (
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	gethnode "github.com/ethereum/go-ethereum/node"
)

// devFunds is what the dev key holds at genesis on the simulated chain.
var devFunds = new(big.Int).Mul(big.NewInt(10_000), big.NewInt(1e18))

// startSimulated runs go-ethereum's simulated backend with its node's HTTP
// JSON-RPC server on a loopback port, and seals a block every blockTime. The
// dev key is funded at genesis.
func startSimulated(blockTime time.Duration) (*node, error) {
	var lastErr error
	// The port is picked before the node listens on it; another process can
	// take it in between, so try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		sim, err := newBackend(port)
		if err != nil {
			lastErr = err
			continue
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(blockTime)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					sim.Commit()
				}
			}
		}()
		var once sync.Once
		var stopErr error
		stop := func() error {
			once.Do(func() {
				close(done)
				wg.Wait()
				stopErr = sim.Close()
			})
			return stopErr
		}
		return &node{url: fmt.Sprintf("http://127.0.0.1:%d", port), stop: stop}, nil
	}
	return nil, fmt.Errorf("start the simulated chain: %w", lastErr)
}

// newBackend builds the simulated backend serving HTTP on port. The
// simulated package panics when its node cannot start (e.g. the port was
// taken); that is returned as an error.
func newBackend(port int) (sim *simulated.Backend, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("simulated backend on port %d: %v", port, r)
		}
	}()
	alloc := types.GenesisAlloc{DevAddress(): {Balance: devFunds}}
	return simulated.NewBackend(alloc, func(nc *gethnode.Config, _ *ethconfig.Config) {
		nc.HTTPHost = "127.0.0.1"
		nc.HTTPPort = port
		nc.HTTPModules = []string{"eth", "net", "web3"}
		nc.HTTPVirtualHosts = []string{"*"}
	}), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
