package relayer_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/store/storetest"
)

// childEnv carries a childSpec to a re-executed test binary, which then runs
// a relayer process (runChild) instead of the tests.
const childEnv = "RFLOW_RELAYER_CHILD"

type childSend struct {
	ExternalID string         `json:"external_id"`
	To         common.Address `json:"to"`
	Value      string         `json:"value"`
}

type childSpec struct {
	DatabaseURL string      `json:"database_url"`
	RPC         string      `json:"rpc"`
	KeyIndex    int         `json:"key_index"`
	Sends       []childSend `json:"sends"`
	// Fault is the fault point where the child kills itself ("": none).
	Fault string `json:"fault"`
	// OneTx queues every send in one transaction, so their jobs are
	// fetched together and broadcast in batches.
	OneTx bool `json:"one_tx"`
	// ChainID is the node's (0: anvil's).
	ChainID uint64 `json:"chain_id"`
}

// runChild is a relayer process: it recovers, queues the spec's sends
// (idempotently) and works until all of them are final. The spec's fault
// point kills it on the way.
func runChild() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	if err := child(spec); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func child(spec childSpec) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, spec.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	eth, err := ethclient.Dial(spec.RPC)
	if err != nil {
		return err
	}
	w, err := relayer.WalletFromKey(anviltest.DevKeys[spec.KeyIndex])
	if err != nil {
		return err
	}
	id := cmp.Or(spec.ChainID, chainID)
	r, err := relayer.New(relayer.Config{Pool: pool, Wallets: map[string]*relayer.Wallet{"ops": w},
		Networks: map[uint64]relayer.Backend{id: eth}, PollInterval: 50 * time.Millisecond,
		StaleAfter: time.Second, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Fault: killAt(spec.Fault)})
	if err != nil {
		return err
	}
	client := newClient(nil, pool, r)
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer client.Stop(context.WithoutCancel(ctx))
	if _, err := r.Recover(ctx); err != nil {
		return err
	}
	batches := [][]childSend{spec.Sends}
	if !spec.OneTx {
		batches = nil
		for _, s := range spec.Sends {
			batches = append(batches, []childSend{s})
		}
	}
	for _, sends := range batches {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, s := range sends {
				v, _ := new(big.Int).SetString(s.Value, 10)
				if _, _, err := r.QueueTx(ctx, tx, relayer.Request{ExternalID: s.ExternalID, Wallet: "ops", ChainID: id, To: s.To, Value: v}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for {
		done := 0
		for _, s := range spec.Sends {
			t, err := r.Get(ctx, s.ExternalID)
			if err != nil {
				return err
			}
			if t.Final() {
				done++
			}
		}
		if done == len(spec.Sends) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if _, err := r.Recover(ctx); err != nil {
			return err
		}
	}
}

// killAt is a relayer fault hook that SIGKILLs the process at point, or at
// its nth call for "point:n".
func killAt(point string) func(string) {
	name, nth, _ := strings.Cut(point, ":")
	n, _ := strconv.Atoi(nth)
	var calls atomic.Int64
	return func(p string) {
		if p == name && calls.Add(1) >= int64(max(n, 1)) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL lands first
		}
	}
}

// startChild runs a relayer process with fault point fault ("" for none)
// and waits for it to exit.
func startChild(t *testing.T, spec childSpec, fault string) error {
	t.Helper()
	spec.Fault = fault
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd.Run()
}

func requireKilled(t *testing.T, err error) {
	t.Helper()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "child should have been killed, got %v", err)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child exit: %v", err)
}

// TestCrashAtEachPointSendsOnce kills a real relayer process with SIGKILL at
// each point between queueing and finality, restarts it, and checks that
// every send made exactly one transaction on chain.
func TestCrashAtEachPointSendsOnce(t *testing.T) {
	t.Parallel()
	points := []string{"relayer.after-queue", "relayer.before-nonce", "relayer.after-nonce",
		"relayer.before-send", "relayer.after-send", "relayer.before-final"}
	for i, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			node := anviltest.Start(t, anviltest.Options{})
			spec := childSpec{DatabaseURL: storetest.URL(t), RPC: node.URL, KeyIndex: 2 + i%3}
			for j := range 3 {
				spec.Sends = append(spec.Sends, childSend{ExternalID: fmt.Sprintf("rflow:crash:%s:%d", point, j),
					To: freshAddress(t), Value: fmt.Sprint(1000 + j)})
			}
			requireKilled(t, startChild(t, spec, point))
			require.NoError(t, startChild(t, spec, ""))
			assertSentOnce(t, node.Client(), spec, 0)
		})
	}
}

// TestCrashMidBatchSendsOnce is TestCrashAtEachPointSendsOnce with the
// sends queued together, and the process killed at the fourth send's
// point: by then it is typically inside a batch of several (nonces
// reserved for them all, bytes recorded, all sent, receipts found but not
// written), though which batch the fourth send is in is up to timing.
func TestCrashMidBatchSendsOnce(t *testing.T) {
	t.Parallel()
	points := []string{"relayer.after-nonce", "relayer.before-send", "relayer.after-send", "relayer.before-final"}
	for i, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			node := anviltest.Start(t, anviltest.Options{})
			spec := childSpec{DatabaseURL: storetest.URL(t), RPC: node.URL, KeyIndex: 1 + i, OneTx: true}
			for j := range 8 {
				spec.Sends = append(spec.Sends, childSend{ExternalID: fmt.Sprintf("rflow:batch-crash:%s:%d", point, j),
					To: freshAddress(t), Value: fmt.Sprint(1000 + j)})
			}
			requireKilled(t, startChild(t, spec, point+":4"))
			require.NoError(t, startChild(t, spec, ""))
			assertSentOnce(t, node.Client(), spec, 0)
		})
	}
}

// TestCrashAfterNonceThenOutsideUseHeals kills the relayer after it
// reserved a nonce but before it broadcast, lets someone else use that nonce
// with the same key, and checks the restarted relayer moves the send to a
// new nonce: one transaction per send, plus the outsider's.
func TestCrashAfterNonceThenOutsideUseHeals(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{})
	url := storetest.URL(t)
	spec := childSpec{DatabaseURL: url, RPC: node.URL, KeyIndex: 1}
	for j := range 2 {
		spec.Sends = append(spec.Sends, childSend{ExternalID: fmt.Sprintf("rflow:heal:%d", j), To: freshAddress(t), Value: "77"})
	}
	requireKilled(t, startChild(t, spec, "relayer.after-nonce"))

	tb := &testBundle{node: node, eth: node.Client(), keyIdx: 1}
	w, err := relayer.WalletFromKey(anviltest.DevKeys[1])
	require.NoError(t, err)
	tb.wallet = w
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	var reserved int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT nonce FROM relayer.transactions WHERE nonce IS NOT NULL`).Scan(&reserved))
	tb.sendOutside(t, uint64(reserved), gwei(1))
	waitFor(t, "outside send mined", func() bool { return tb.nonce(t) == uint64(reserved)+1 })

	require.NoError(t, startChild(t, spec, ""))
	assertSentOnce(t, node.Client(), spec, 1)
}

// assertSentOnce checks every send is confirmed, each recipient got its
// value exactly once, and the wallet's nonce counts one transaction per send
// (plus outside ones).
func assertSentOnce(t *testing.T, eth *ethclient.Client, spec childSpec, outside uint64) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, spec.DatabaseURL)
	require.NoError(t, err)
	defer pool.Close()
	for _, s := range spec.Sends {
		var status string
		var rows int
		require.NoError(t, pool.QueryRow(ctx, `SELECT max(status), count(*) FROM relayer.transactions WHERE external_id = $1`,
			s.ExternalID).Scan(&status, &rows))
		require.Equal(t, 1, rows)
		require.Equal(t, "confirmed", status, s.ExternalID)
		bal, err := eth.BalanceAt(ctx, s.To, nil)
		require.NoError(t, err)
		require.Equal(t, s.Value, bal.String(), "recipient of %s", s.ExternalID)
	}
	_, from := anviltest.Key(t, spec.KeyIndex)
	n, err := eth.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(len(spec.Sends))+outside, n)
}
