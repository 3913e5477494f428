package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

const (
	relayerSends   = 300
	relayerWallets = 3
	// relayerWorkers: more workers than this only queue up on anvil, which
	// answers one request at a time.
	relayerWorkers = 16
)

// BenchmarkRelayerConfirmedSends measures sends per second through the
// relayer on anvil (automine), from queueing to every send confirmed, with
// sends spread over a few wallets. Side by side it measures a bare baseline
// on the same node: sign, eth_sendRawTransaction and poll for the receipt,
// the same number of transfers, one goroutine per wallet.
func BenchmarkRelayerConfirmedSends(b *testing.B) {
	var relayerRate, rawRate float64
	for range b.N {
		rawRate = rawSendRate(b)
		relayerRate = relayerSendRate(b)
	}
	b.ReportMetric(relayerRate, "relayer-sends/s")
	b.ReportMetric(rawRate, "raw-sends/s")
	b.ReportMetric(relayerRate/rawRate, "ratio")
	summary.add("confirmed sends/s: relayer / raw go-ethereum", relayerRate, rawRate, 0.5)
	fmt.Printf("relayer confirmed sends/s: %.0f  raw sign+send+receipt/s: %.0f  ratio: %.2f  (%d sends, %d wallets)\n",
		relayerRate, rawRate, relayerRate/rawRate, relayerSends, relayerWallets)
}

func relayerSendRate(b *testing.B) float64 {
	ctx := context.Background()
	node := anviltest.Start(b, anviltest.Options{})
	eth := node.Client()
	trace := &stmtTimes{}
	pool := tracedPool(b, trace)
	network := relayer.Backend(eth)
	var calls *rpcCalls
	if os.Getenv("RFLOW_BENCH_TRACE") != "" {
		calls = &rpcCalls{next: http.DefaultTransport}
		calls.reset()
		rc, err := rpc.DialOptions(ctx, node.URL, rpc.WithHTTPClient(&http.Client{Transport: calls}))
		require.NoError(b, err)
		b.Cleanup(rc.Close)
		network = ethclient.NewClient(rc)
	}
	wallets := map[string]*relayer.Wallet{}
	for i := range relayerWallets {
		w, err := relayer.WalletFromKey(anviltest.DevKeys[i])
		require.NoError(b, err)
		wallets[fmt.Sprint("w", i)] = w
	}
	r, err := relayer.New(relayer.Config{Pool: pool, Wallets: wallets,
		Networks: map[uint64]relayer.Backend{anviltest.ChainID: network}, PollInterval: 20 * time.Millisecond})
	require.NoError(b, err)
	workers := river.NewWorkers()
	r.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:        "river",
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: relayerWorkers}},
		Workers:       workers,
		FetchCooldown: benchCooldown, FetchPollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(b, err)
	require.NoError(b, client.Start(ctx))
	defer client.Stop(context.WithoutCancel(ctx))
	_, err = r.Recover(ctx)
	require.NoError(b, err)

	to := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	trace.reset()
	calls.reset()
	defer trace.print("relayer sends")
	defer calls.print(relayerSends)
	start := time.Now()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := range relayerSends {
			_, _, err := r.QueueTx(ctx, tx, relayer.Request{ExternalID: fmt.Sprintf("bench:%d", i),
				Wallet: fmt.Sprint("w", i%relayerWallets), ChainID: anviltest.ChainID, To: to, Value: big.NewInt(1)})
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(b, err)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var confirmed, final int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'confirmed'),
			count(*) FILTER (WHERE status NOT IN ('pending', 'in_mempool', 'mined')) FROM relayer.transactions`).
			Scan(&confirmed, &final))
		if final == relayerSends {
			require.Equal(b, relayerSends, confirmed)
			break
		}
		require.True(b, time.Now().Before(deadline), "relayer bench: %d/%d confirmed", confirmed, relayerSends)
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	var toBroadcast, toFinal float64
	require.NoError(b, pool.QueryRow(ctx, `SELECT
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM broadcast_at - created_at)),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - broadcast_at))
		FROM relayer.transactions`).Scan(&toBroadcast, &toFinal))
	fmt.Printf("relayer p50: queue→broadcast %.0f ms, broadcast→confirmed %.0f ms\n", toBroadcast*1000, toFinal*1000)
	bal, err := eth.BalanceAt(ctx, to, nil)
	require.NoError(b, err)
	require.Equal(b, int64(relayerSends), bal.Int64(), "each send exactly once")
	return float64(relayerSends) / elapsed.Seconds()
}

// rawSendRate is the baseline: what a client does without any durability.
func rawSendRate(b *testing.B) float64 {
	ctx := context.Background()
	node := anviltest.Start(b, anviltest.Options{})
	eth := node.Client()
	to := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	signer := types.LatestSignerForChainID(big.NewInt(anviltest.ChainID))
	start := time.Now()
	errs := make(chan error, relayerWallets)
	for w := range relayerWallets {
		go func() {
			key, err := crypto.HexToECDSA(anviltest.DevKeys[w])
			if err != nil {
				errs <- err
				return
			}
			from := crypto.PubkeyToAddress(key.PublicKey)
			nonce, err := eth.PendingNonceAt(ctx, from)
			if err != nil {
				errs <- err
				return
			}
			for i := w; i < relayerSends; i += relayerWallets {
				head, err := eth.HeaderByNumber(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				tip := big.NewInt(1_000_000_000)
				tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{ChainID: big.NewInt(anviltest.ChainID),
					Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip),
					Gas: 21000, To: &to, Value: big.NewInt(1)})
				if err != nil {
					errs <- err
					return
				}
				if err := eth.SendTransaction(ctx, tx); err != nil {
					errs <- err
					return
				}
				for {
					_, err := eth.TransactionReceipt(ctx, tx.Hash())
					if err == nil {
						break
					}
					if err != ethereum.NotFound {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond)
				}
				nonce++
			}
			errs <- nil
		}()
	}
	for range relayerWallets {
		require.NoError(b, <-errs)
	}
	return float64(relayerSends) / time.Since(start).Seconds()
}
