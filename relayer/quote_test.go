package relayer_test

import (
	"context"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/relayer"
)

// tipCounter is a node without batches that counts the fee quotes asked.
type tipCounter struct {
	relayer.Backend
	tips atomic.Int64
}

func (c *tipCounter) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	c.tips.Add(1)
	time.Sleep(20 * time.Millisecond) // a node a little way off
	return c.Backend.SuggestGasTipCap(ctx)
}

// A burst of sends with no fee quote yet asks the node for one once, not
// once per worker racing to it; every send is confirmed once.
func TestBurstAsksOneFeeQuote(t *testing.T) {
	t.Parallel()
	var node *tipCounter
	tb := setup(t, setupOpts{backend: func(c *ethclient.Client) relayer.Backend {
		node = &tipCounter{Backend: c}
		return node
	}})
	const sends = 20
	tb.confirmedOnce(t, tb.queueAll(t, sends))
	require.LessOrEqual(t, node.tips.Load(), int64(3), "one quote per marketTTL, shared")
}
