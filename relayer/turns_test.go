package relayer

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

// A wallet's turn is one at a time per network; a waiter whose context ends
// gives up with its error and holds nothing, and a released turn is taken
// by the next.
func TestTurnIsOneAtATimeAndEndsWithTheContext(t *testing.T) {
	r := &Relayer{turns: map[walletChain]chan struct{}{}}
	ctx := context.Background()
	a, b := common.HexToAddress("0xa"), common.HexToAddress("0xb")
	release, err := r.turn(ctx, a, 1)
	require.NoError(t, err)

	other, err := r.turn(ctx, b, 1)
	require.NoError(t, err, "another wallet has its own turn")
	other()
	otherChain, err := r.turn(ctx, a, 2)
	require.NoError(t, err, "the wallet on another network has its own turn")
	otherChain()

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = r.turn(short, a, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the turn is held")

	got := make(chan func(), 1)
	go func() {
		next, err := r.turn(ctx, a, 1)
		if err == nil {
			got <- next
		}
	}()
	select {
	case <-got:
		t.Fatal("took a held turn")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	select {
	case next := <-got:
		next()
	case <-time.After(5 * time.Second):
		t.Fatal("a released turn was not taken")
	}
}
