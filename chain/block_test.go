package chain_test

import (
	"context"
	"encoding/json"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

func TestBlockAndReadTriggers(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "every3", "read2", "tick")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	e.Deposit(7)
	start := int64(node.BlockNumber())
	runService(t, pool, chain.Config{Networks: []chain.Network{network(node.URL)},
		Blocks: []chain.BlockTrigger{{Workflow: "every3", Network: "local", Every: 3}},
		Reads: []chain.ReadTrigger{
			{Workflow: "read2", Network: "local", Address: e.Address, Method: e.ABI.Methods["totalAssets"],
				EveryBlocks: 2, Confirmations: 1, When: func(r any) (bool, error) { return r.(*big.Int).Cmp(big.NewInt(7)) > 0, nil }},
			{Workflow: "tick", Network: "local", Address: e.Address, Method: e.ABI.Methods["totalAssets"],
				Interval: 500 * time.Millisecond},
		}})
	// Wait until the triggers started (cursors exist) before moving the chain.
	eventually(t, 20*time.Second, "block cursors", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.cursors WHERE phase = 'block'`) == 2
	})
	e.Deposit(5) // totalAssets 12 from here on
	node.Mine(12)
	tip := int64(node.BlockNumber())
	eventually(t, 20*time.Second, "block runs", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.cursors WHERE task = 'block/every3' AND block = $1`, tip) == 1
	})
	var want []string
	for b := start + 1; b <= tip; b++ {
		if b%3 == 0 {
			want = append(want, big.NewInt(b).String())
		}
	}
	require.Equal(t, want, keys(t, pool, "every3"))

	// read2: every 2 blocks, 1 deep, only when totalAssets > 7 (after the second deposit).
	eventually(t, 20*time.Second, "read cursor", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.cursors WHERE task = 'read/read2' AND block = $1`, tip-1) == 1
	})
	deposit2 := start + 1
	want = nil
	for b := start + 1; b <= tip-1; b++ {
		if b%2 == 0 && b >= deposit2 {
			want = append(want, big.NewInt(b).String())
		}
	}
	require.Equal(t, want, keys(t, pool, "read2"))
	var payload []byte
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT trigger FROM rflow.workflow_runs WHERE workflow_name = 'read2' LIMIT 1`).Scan(&payload))
	var p struct{ Result json.Number }
	require.NoError(t, json.Unmarshal(payload, &p))
	require.Equal(t, "12", p.Result.String())

	// tick: one run per 500ms slot, keyed by the slot's RFC 3339 instant.
	eventually(t, 20*time.Second, "interval reads", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs WHERE workflow_name = 'tick'`) >= 2
	})
	for _, k := range keys(t, pool, "tick") {
		_, err := time.Parse(time.RFC3339, k)
		require.NoError(t, err, k)
	}
}

// keys lists a workflow's trigger keys in claim order.
func keys(t *testing.T, pool *pgxpool.Pool, wf string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT trigger_key FROM rflow.workflow_runs WHERE workflow_name = $1 ORDER BY block_number, created_at`, wf)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func TestSubscribeDeliversAtDepthWithoutRuns(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	e.Transact("claim", big.NewInt(1)) // already 2 deep when subscribing: never delivered
	node.Mine(2)
	claimed, err := chain.NewEvent(e.ABI, "Claimed")
	require.NoError(t, err)
	svc := runService(t, pool, chain.Config{Networks: []chain.Network{network(node.URL)}})
	eventually(t, 20*time.Second, "the window", func() bool {
		return count(t, pool, `SELECT count(*) FROM indexer.blocks`) > 0
	})

	var mu sync.Mutex
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, svc.Subscribe(ctx, chain.Subscription{ChainID: anviltest.ChainID, Address: e.Address,
		Event: claimed, Depth: 2, Deliver: func(ctx context.Context, d chain.Decoded) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d.Args["amount"].(*big.Int).String())
			return nil
		}}))
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	time.Sleep(300 * time.Millisecond) // let the subscription take its start
	e.Transact("claim", big.NewInt(2))
	e.Deposit(3) // one block on top: depth 1, not yet 2
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, delivered(), "delivered before depth 2")
	node.Mine(1)
	eventually(t, 10*time.Second, "delivery at depth 2", func() bool { return len(delivered()) == 1 })
	require.Equal(t, []string{"2"}, delivered())
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`), "a subscription never creates runs")
}
