package devchain

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
)

// startAnvil runs anvil on a loopback port, sealing a block every
// blockTime, and waits until it answers JSON-RPC. anvil gets SIGKILL if this
// process dies, so a killed `rflow dev` leaves no chain behind.
func startAnvil(ctx context.Context, explicit string, blockTime time.Duration) (*node, error) {
	bin, err := anvilPath(explicit)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	secs := max(1, int(blockTime.Round(time.Second)/time.Second))
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--block-time", strconv.Itoa(secs), "--silent")
	// Own process group: a terminal's Ctrl-C reaches rflow, which stops
	// anvil in order, rather than killing anvil first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start anvil (%s): %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(3 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
		return nil
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitRPC(ctx, url, exited, 20*time.Second); err != nil {
		_ = stop()
		return nil, err
	}
	return &node{url: url, pid: cmd.Process.Pid, stop: stop}, nil
}

// waitRPC polls eth_chainId until the node answers.
func waitRPC(ctx context.Context, url string, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := rpc.DialContext(ctx, url)
		if err == nil {
			var id string
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err = c.CallContext(cctx, &id, "eth_chainId")
			cancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("anvil exited during start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("anvil did not answer on %s within %s: %w", url, limit, err)
		}
	}
}
