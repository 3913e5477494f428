package chain_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// limitingProxy forwards to upstream but answers eth_getLogs over more than
// maxRange blocks with a provider-style "too many results" error.
func limitingProxy(t *testing.T, upstream string, maxRange uint64, refused *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params []struct {
				From string `json:"fromBlock"`
				To   string `json:"toBlock"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method == "eth_getLogs" && len(req.Params) == 1 {
			from, _ := hexutil.DecodeUint64(req.Params[0].From)
			to, _ := hexutil.DecodeUint64(req.Params[0].To)
			if to-from+1 > maxRange {
				refused.Add(1)
				w.Header().Set("content-type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) +
					`,"error":{"code":-32005,"message":"query returned more than 10000 results"}}`))
				return
			}
		}
		forward(w, upstream, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// forward relays a JSON-RPC request body to upstream and its answer to w.
func forward(w http.ResponseWriter, upstream string, body []byte) {
	resp, err := http.Post(upstream, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

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
	var refused atomic.Int64
	proxy := limitingProxy(t, node.URL, 3, &refused)

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
	require.Positive(t, refused.Load(), "wide ranges were refused and shrunk")
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
