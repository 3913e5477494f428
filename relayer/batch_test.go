package relayer_test

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

// batchCounter is the node, counting the eth_sendRawTransaction calls the
// relayer makes and how many go in one request.
type batchCounter struct {
	*ethclient.Client
	requests, sends, largest atomic.Int64

	mu     sync.Mutex
	hashes map[string]int // times each signed transaction was sent
}

func (b *batchCounter) sent(raw string) {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(common.FromHex(raw)); err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hashes == nil {
		b.hashes = map[string]int{}
	}
	b.hashes[tx.Hash().Hex()]++
}

func (b *batchCounter) BatchCallContext(ctx context.Context, batch []rpc.BatchElem) error {
	var n int64
	for _, e := range batch {
		if e.Method == "eth_sendRawTransaction" {
			n++
			if raw, ok := e.Args[0].(string); ok {
				b.sent(raw)
			}
		}
	}
	if n > 0 {
		b.requests.Add(1)
		b.sends.Add(n)
		if n > b.largest.Load() {
			b.largest.Store(n)
		}
	}
	return b.Client.Client().BatchCallContext(ctx, batch)
}

func (b *batchCounter) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	b.requests.Add(1)
	b.sends.Add(1)
	b.mu.Lock()
	if b.hashes == nil {
		b.hashes = map[string]int{}
	}
	b.hashes[tx.Hash().Hex()]++
	b.mu.Unlock()
	return b.Client.SendTransaction(ctx, tx)
}

// queueAll commits n sends of 1..n wei to one recipient in one transaction,
// so their jobs are fetched together.
func (tb *testBundle) queueAll(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	to := freshAddress(t)
	var keys []string
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		for i := range n {
			keys = append(keys, ext(t, i))
			_, _, err := tb.r.QueueTx(ctx, tx, relayer.Request{ExternalID: ext(t, i), Wallet: "ops", ChainID: cmp.Or(tb.chainID, chainID),
				To: to, Value: big.NewInt(int64(i + 1))})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	t.Cleanup(func() {
		if !t.Failed() {
			require.Equal(t, int64(n*(n+1)/2), tb.balance(t, to).Int64(), "each send paid once")
		}
	})
	return keys
}

// confirmedOnce waits for every send of keys (all of the wallet's) to be
// final and checks each is confirmed, accepted, its hook run once (when
// the bundle's relayer counts them: finals not nil) and one transaction on chain.
func (tb *testBundle) confirmedOnce(t *testing.T, keys []string) {
	t.Helper()
	for _, k := range keys {
		got := tb.waitFinal(t, k)
		require.Equal(t, relayer.StatusConfirmed, got.Status, got.Error)
		require.True(t, got.Accepted, k)
		if tb.finals != nil {
			require.Equal(t, 1, tb.finalCalls(k), k)
		}
	}
	require.Equal(t, uint64(len(keys)), tb.nonce(t), "one transaction per send")
}

// A burst of one wallet's sends goes out in batches: several signed
// transactions per request to the node, in nonce order, each nonce used
// once, each send confirmed once with its hook run once.
func TestBurstOfOneWalletIsBatched(t *testing.T) {
	t.Parallel()
	var counter *batchCounter
	tb := setup(t, setupOpts{backend: func(c *ethclient.Client) relayer.Backend {
		counter = &batchCounter{Client: c}
		return counter
	}})
	const sends = 30
	tb.confirmedOnce(t, tb.queueAll(t, sends))
	var nonces []int64
	rows, err := tb.pool.Query(context.Background(), `SELECT nonce FROM relayer.transactions ORDER BY nonce`)
	require.NoError(t, err)
	nonces, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	for i, n := range nonces {
		require.Equal(t, int64(i), n)
	}
	// What went to the node is what was recorded before it was sent. A
	// loaded anvil sometimes strands a transaction that reaches it while
	// it mines the one before (see stalled, monitor.go): its bytes are
	// then sent again and replaced, the replacement recorded first. With
	// no replacement, each send's bytes went exactly once.
	var recorded []string
	rows, err = tb.pool.Query(context.Background(), `SELECT hash FROM relayer.broadcasts WHERE sent_at IS NOT NULL`)
	require.NoError(t, err)
	recorded, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	counter.mu.Lock()
	for _, h := range recorded {
		require.GreaterOrEqual(t, counter.hashes[h], 1, "recorded broadcast %s was sent", h)
	}
	for h := range counter.hashes {
		require.Contains(t, recorded, h, "nothing was sent that was not recorded first")
	}
	counter.mu.Unlock()
	if len(recorded) == sends {
		require.Equal(t, int64(sends), counter.sends.Load(), "each send's bytes sent once")
	} else {
		t.Logf("%d stranded sends were replaced (%d sends in all)", len(recorded)-sends, counter.sends.Load())
	}
	require.Greater(t, counter.largest.Load(), int64(1), "some sends shared a request")
	require.Less(t, counter.requests.Load(), int64(sends))
}

// logLines records the messages logged.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) saw(msg string) bool { return l.count(msg) > 0 }

func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.lines {
		if strings.Contains(m, msg) {
			n++
		}
	}
	return n
}

// When one send's FinalHook fails, its batch's final transaction rolls
// back whole and every send is finalised by its own job: the others at
// once, the failing one when its job retries. Each hook's writes commit
// exactly once.
func TestFailingHookFailsOnlyItsOwnSendOfABatch(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noClient: true})
	ctx := context.Background()
	_, err := tb.pool.Exec(ctx, `CREATE TABLE hook_calls (external_id text NOT NULL)`)
	require.NoError(t, err)
	const sends = 12
	var refused atomic.Bool
	logs := &logLines{}
	r, err := relayer.New(relayer.Config{Pool: tb.pool, Wallets: map[string]*relayer.Wallet{"ops": tb.wallet},
		Networks: map[uint64]relayer.Backend{chainID: tb.eth}, PollInterval: 50 * time.Millisecond, Logger: slog.New(logs),
		OnFinal: func(ctx context.Context, tx pgx.Tx, s *relayer.Transaction) error {
			if s.ExternalID == ext(t, 3) && refused.CompareAndSwap(false, true) {
				return errors.New("hook refuses once")
			}
			_, err := tx.Exec(ctx, `INSERT INTO hook_calls VALUES ($1)`, s.ExternalID)
			return err
		}})
	require.NoError(t, err)
	tb.r, tb.finals = r, nil // hook_calls counts what committed
	keys := tb.queueAll(t, sends)
	tb.startClient(t, r)
	tb.confirmedOnce(t, keys)
	require.True(t, refused.Load())
	require.True(t, logs.saw("finalising a batch of sends failed"), "the failing hook was in a batch")
	rows, err := tb.pool.Query(ctx, `SELECT count(*) FROM hook_calls GROUP BY external_id`)
	require.NoError(t, err)
	counts, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, counts, sends)
	for _, c := range counts {
		require.Equal(t, int64(1), c)
	}
}

// On a chain with real block times a batch finds no receipts at once: it
// records every send as in the mempool in one write, and each send's job
// confirms it at a later poll, once.
func TestBurstOnTimedBlocksIsInMempoolThenConfirmed(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{node: anviltest.Options{BlockTime: time.Second}})
	const sends = 10
	keys := tb.queueAll(t, sends)
	waitFor(t, "every send accepted", func() bool {
		var accepted int
		require.NoError(t, tb.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM relayer.transactions WHERE broadcast_at IS NOT NULL`).Scan(&accepted))
		return accepted == sends
	})
	tb.confirmedOnce(t, keys)
}

// noBatches is a provider that refuses JSON-RPC batches whole.
type noBatches struct {
	*ethclient.Client
	refused atomic.Int64
}

func (n *noBatches) BatchCallContext(context.Context, []rpc.BatchElem) error {
	n.refused.Add(1)
	return errors.New("429: batch requests are not supported on this plan")
}

// A provider that takes no batches gets each call alone, in the same run:
// every send of a burst still finishes in its job's first run, once.
func TestProviderWithoutBatchesGetsCallsOneByOne(t *testing.T) {
	t.Parallel()
	var node *noBatches
	tb := setup(t, setupOpts{backend: func(c *ethclient.Client) relayer.Backend {
		node = &noBatches{Client: c}
		return node
	}})
	const sends = 12
	tb.confirmedOnce(t, tb.queueAll(t, sends))
	require.Positive(t, node.refused.Load(), "some sends were batched")
	var later int
	require.NoError(t, tb.pool.QueryRow(context.Background(), `SELECT count(*) FROM river.river_job
		WHERE kind = 'relayer_send' AND cardinality(attempted_by) > 1`).Scan(&later))
	require.Zero(t, later, "a send needed a second run")
}
