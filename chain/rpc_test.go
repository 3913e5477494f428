package chain_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/rpcproxy"
	"github.com/rflow-dev/rflow/store/storetest"
)

// One URL always fails with HTTP 500, the next one refuses wide log ranges:
// ingestion fails over, shrinks its range and still claims every log.
func TestFailoverAndAdaptiveRange(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	for i := int64(0); i < 10; i++ {
		e.EmitMany(50, i*50)
	}
	var broken atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		broken.Add(1)
		http.Error(w, "upstream down", http.StatusInternalServerError)
	}))
	t.Cleanup(bad.Close)
	proxy := rpcproxy.Start(t, node.URL)
	proxy.Set(rpcproxy.Faults{RangeLimit: 3, RangeStyle: rpcproxy.QuickNodeRange})

	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	net := network(bad.URL, proxy.URL)
	net.MaxBlockRange = 64
	runService(t, pool, chain.Config{Networks: []chain.Network{net},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	eventually(t, 30*time.Second, "all 500 logs claimed", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 500
	})
	require.Positive(t, broken.Load(), "the broken URL was tried")
	require.Positive(t, proxy.Refused(rpcproxy.RefusedRange), "wide ranges were refused and shrunk")
}

// anvil is killed and comes back as a fresh chain: the service survives
// the outage, treats the new chain as a replacement (rewinding everything),
// and claims the new chain's logs.
func TestNodeKilledAndRestarted(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	e.EmitMany(20, 0)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	runService(t, pool, chain.Config{Networks: []chain.Network{network(node.URL)},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	eventually(t, 20*time.Second, "first chain's logs", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 20
	})

	node.Stop()
	time.Sleep(time.Second) // the service keeps retrying meanwhile
	node.Restart()
	e2 := anviltest.DeployEmitter(t, node)
	require.Equal(t, e.Address, e2.Address)
	e2.EmitMany(30, 1000) // other amounts: other transactions, other keys
	eventually(t, 30*time.Second, "new chain's logs", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE (trigger->'event'->>'amount')::int >= 1000`) == 30
	})
	require.Equal(t, 20, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE orphaned_at IS NOT NULL`),
		"the replaced chain's runs are orphaned")
	require.Positive(t, count(t, pool, `SELECT count(*) FROM indexer.reorgs`))
}

// With a WebSocket URL, newHeads wake the head tracker: even with an hour's
// poll interval a new log is claimed at once.
func TestNewHeadsOverWebSocket(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	net := network(node.URL)
	net.WS = "ws://127.0.0.1:" + strconv.Itoa(node.Port)
	net.BlockPollInterval = time.Hour
	runService(t, pool, chain.Config{Networks: []chain.Network{net},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	eventually(t, 10*time.Second, "the window", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks`) > 0
	})
	time.Sleep(200 * time.Millisecond) // the subscription is established
	e.Deposit(1)
	eventually(t, 10*time.Second, "the claim woken by newHeads", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 1
	})
}

// A network whose first rpc: URL is a WebSocket nobody listens on (with
// credentials in it) still starts: Dial warns about that URL, redacted, and
// calls fail over to the next one, so the service claims logs through it.
func TestDeadWebSocketFirstURLFailsOver(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "ws://rflow:hunter2@" + ln.Addr().String() + "/v3/9aK2b7Qx4LmN8pR1sT6vW3yZ"
	require.NoError(t, ln.Close())
	node := anviltest.Start(t, anviltest.Options{})

	var logs bytes.Buffer
	c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{dead, node.URL},
		Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))})
	require.NoError(t, err, "a dead first URL does not fail the client")
	defer c.Close()
	id, err := c.ChainID(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(31337), id)
	require.Contains(t, logs.String(), "url=ws://rflow:xxxxx@"+ln.Addr().String()+"/v3/xxxxx", "the warning names the dead URL, redacted")
	require.Contains(t, logs.String(), "level=WARN")
	require.NotContains(t, logs.String(), "hunter2")
	require.NotContains(t, logs.String(), "9aK2b7Qx4LmN8pR1sT6vW3yZ")

	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	e := anviltest.DeployEmitter(t, node)
	e.EmitMany(5, 0)
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	runService(t, pool, chain.Config{Networks: []chain.Network{network(dead, node.URL)},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	eventually(t, 30*time.Second, "the logs claimed through the second URL", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 5
	})
}

// syncWriter serialises writes of concurrent loggers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// A WebSocket URL that did not answer at Dial is dialled again by later
// calls: once a node listens there, calls go through it.
func TestDeadWebSocketURLIsDialledAgain(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	c, err := chain.Dial(context.Background(), chain.ClientOptions{URLs: []string{"ws://127.0.0.1:" + strconv.Itoa(port)},
		Attempts: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ChainID(context.Background())
	require.ErrorContains(t, err, "connection refused")

	anviltest.Start(t, anviltest.Options{Port: port})
	id, err := c.ChainID(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(31337), id)
}
