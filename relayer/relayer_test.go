package relayer_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	storetest.Main(m)
}

const chainID = anviltest.ChainID

// testBundle is a relayer on a fresh database and anvil, with its River
// client running.
type testBundle struct {
	pool    *pgxpool.Pool
	node    *anviltest.Node
	eth     *ethclient.Client
	r       *relayer.Relayer
	wallet  *relayer.Wallet
	keyIdx  int
	mu      sync.Mutex
	finals  map[string]int // external_id → FinalHook calls
	options relayer.Config
	chainID uint64 // the node's chain (0: anvil's)
}

type setupOpts struct {
	node     anviltest.Options
	backend  func(*ethclient.Client) relayer.Backend // wraps the node; nil: as is
	config   relayer.Config                          // tuning fields only
	noClient bool
}

func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	tb := &testBundle{pool: storetest.Pool(t), node: anviltest.Start(t, o.node), finals: map[string]int{}, keyIdx: 1}
	tb.eth = tb.node.Client()
	if o.backend != nil {
		o.config.Networks = map[uint64]relayer.Backend{chainID: o.backend(tb.eth)}
	}
	tb.r = tb.newRelayer(t, o.config)
	if !o.noClient {
		tb.startClient(t, tb.r)
	}
	return tb
}

// newRelayer builds a relayer with dev key 1 as wallet "ops".
func (tb *testBundle) newRelayer(t *testing.T, c relayer.Config) *relayer.Relayer {
	t.Helper()
	w, err := relayer.WalletFromKey(anviltest.DevKeys[tb.keyIdx])
	require.NoError(t, err)
	tb.wallet = w
	c.Pool = tb.pool
	if c.Wallets == nil {
		c.Wallets = map[string]*relayer.Wallet{}
	}
	c.Wallets["ops"] = w
	if c.Networks == nil {
		c.Networks = map[uint64]relayer.Backend{chainID: tb.eth}
	}
	if c.PollInterval == 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.Logger == nil && testing.Verbose() {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c.OnFinal = func(ctx context.Context, tx pgx.Tx, t *relayer.Transaction) error {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		tb.finals[t.ExternalID]++
		return nil
	}
	r, err := relayer.New(c)
	require.NoError(t, err)
	return r
}

func (tb *testBundle) startClient(t *testing.T, r *relayer.Relayer, periodic ...*river.PeriodicJob) {
	t.Helper()
	client := newClient(t, tb.pool, r, periodic...)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
}

func newClient(t testing.TB, pool *pgxpool.Pool, r *relayer.Relayer, periodic ...*river.PeriodicJob) *river.Client[pgx.Tx] {
	workers := river.NewWorkers()
	r.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		PeriodicJobs:      periodic,
		Schema:            "river",
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
		Workers:           workers,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// queue commits one send of value wei to `to`.
func (tb *testBundle) queue(t *testing.T, req relayer.Request) (*relayer.Transaction, bool) {
	t.Helper()
	ctx := context.Background()
	if req.Wallet == "" {
		req.Wallet = "ops"
	}
	if req.ChainID == 0 {
		req.ChainID = chainID
	}
	var out *relayer.Transaction
	var created bool
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		var err error
		out, created, err = tb.r.QueueTx(ctx, tx, req)
		return err
	}))
	return out, created
}

// waitFinal polls until the send is final.
func (tb *testBundle) waitFinal(t *testing.T, externalID string) *relayer.Transaction {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := tb.r.Get(context.Background(), externalID)
		if err == nil && got.Final() {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("send %s not final in time: %+v (err %v)", externalID, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tb *testBundle) finalCalls(externalID string) int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.finals[externalID]
}

// nonce is the wallet's mined transaction count.
func (tb *testBundle) nonce(t *testing.T) uint64 {
	t.Helper()
	n, err := tb.eth.NonceAt(context.Background(), tb.wallet.Address(), nil)
	require.NoError(t, err)
	return n
}

func (tb *testBundle) balance(t *testing.T, a common.Address) *big.Int {
	t.Helper()
	b, err := tb.eth.BalanceAt(context.Background(), a, nil)
	require.NoError(t, err)
	return b
}

// freshAddress is an address nobody holds a key for: its balance counts
// what the relayer sent to it.
func freshAddress(t *testing.T) common.Address {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	return crypto.PubkeyToAddress(k.PublicKey)
}

// sendOutside sends a 0-value self-transfer with the wallet's key without
// the relayer, at the given nonce, and returns it.
func (tb *testBundle) sendOutside(t *testing.T, nonce uint64, tip *big.Int) *types.Transaction {
	t.Helper()
	ctx := context.Background()
	key, from := anviltest.Key(t, tb.keyIdx)
	head, err := tb.eth.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(3)), tip)
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(chainID), Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap,
		Gas: 21000, To: &from, Value: new(big.Int)})
	tx, err = types.SignTx(tx, types.LatestSignerForChainID(big.NewInt(chainID)), key)
	require.NoError(t, err)
	require.NoError(t, tb.eth.SendTransaction(ctx, tx))
	return tx
}

func gwei(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1_000_000_000)) }

func ext(t *testing.T, i int) string { return fmt.Sprintf("rflow:%s:send:%d", t.Name(), i) }
