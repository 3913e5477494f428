package chain_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// depositKeys returns the trigger key of every Deposit log the node holds
// from addr.
func depositKeys(t *testing.T, node *anviltest.Node, e *anviltest.Emitter) []string {
	t.Helper()
	ctx := context.Background()
	logs, err := node.Client().FilterLogs(ctx, ethereum.FilterQuery{FromBlock: big.NewInt(0),
		Addresses: []common.Address{e.Address}, Topics: [][]common.Hash{{e.ABI.Events["Deposit"].ID}}})
	require.NoError(t, err)
	id, err := node.Client().ChainID(ctx)
	require.NoError(t, err)
	keys := make([]string, len(logs))
	for i, l := range logs {
		keys[i] = chain.EventKey(id.Int64(), l.TxHash, node.TxLogIndex(l), chain.PhaseConfirmed, false)
	}
	return keys
}

// liveKeys returns the keys of wf's runs on chainID that are not orphaned.
func liveKeys(t *testing.T, pool *pgxpool.Pool, chainID int64) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT trigger_key FROM rflow.workflow_runs
		WHERE workflow_name = 'wf' AND chain_id = $1 AND orphaned_at IS NULL ORDER BY trigger_key`, chainID)
	require.NoError(t, err)
	var keys []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	return keys
}

func identityConfig(t *testing.T, url string, chainID int64, e *anviltest.Emitter) chain.Config {
	t.Helper()
	deposit, err := chain.NewEvent(e.ABI, "Deposit")
	require.NoError(t, err)
	net := network(url)
	net.ChainID = chainID
	return chain.Config{LeaseTTL: 3 * time.Second, Networks: []chain.Network{net}, Events: []chain.EventTrigger{{Workflow: "wf", Network: "local",
		Event: deposit, Addresses: []common.Address{e.Address}, StartBlock: 1}}}
}

// One data directory, three chains in turn, as with `rflow dev` sessions:
// anvil A, then a fresh anvil B with the same chain id (another genesis,
// and a lower head than the cursor A left), then a node with another chain
// id. Every Deposit of each new chain is claimed exactly once; the old
// chain's runs are orphaned when its chain id now serves another chain.
func TestChangedChainRestartsCursorsAtStartBlock(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")

	a := anviltest.Start(t, anviltest.Options{Timestamp: 1_700_000_000})
	ea := anviltest.DeployEmitter(t, a)
	for i := int64(0); i < 5; i++ {
		ea.Deposit(i)
	}
	a.Mine(30)
	stop := startService(t, pool, identityConfig(t, a.URL, anviltest.ChainID, ea))
	keysA := depositKeys(t, a, ea)
	require.Len(t, keysA, 5)
	eventually(t, 30*time.Second, "chain A claimed", func() bool { return len(liveKeys(t, pool, anviltest.ChainID)) == 5 })
	stop()
	genesisA := a.Client()
	ga, err := genesisA.HeaderByNumber(context.Background(), big.NewInt(0))
	require.NoError(t, err)
	a.Stop()

	// B replays A's first transactions (same key, nonces and calldata: the
	// same transaction hashes, so the same trigger keys), then more.
	b := anviltest.Start(t, anviltest.Options{Timestamp: 1_800_000_000})
	eb := anviltest.DeployEmitter(t, b)
	require.Equal(t, ea.Address, eb.Address)
	for i := int64(0); i < 15; i++ {
		eb.Deposit(i)
	}
	b.Mine(3)
	gb, err := b.Client().HeaderByNumber(context.Background(), big.NewInt(0))
	require.NoError(t, err)
	require.NotEqual(t, ga.Hash(), gb.Hash(), "the two nodes must serve different chains")
	keysB := depositKeys(t, b, eb)
	require.Len(t, keysB, 15)
	t.Logf("B repeats %d of A's trigger keys", len(intersect(keysA, keysB)))

	stop = startService(t, pool, identityConfig(t, b.URL, anviltest.ChainID, eb))
	eventually(t, 30*time.Second, "chain B claimed", func() bool { return len(liveKeys(t, pool, anviltest.ChainID)) == 15 })
	require.ElementsMatch(t, keysB, liveKeys(t, pool, anviltest.ChainID), "each of B's logs is one run")
	require.Equal(t, 5, count(t, pool, `SELECT count(*) FROM rflow.workflow_runs
		WHERE chain_id = $1 AND orphaned_at IS NOT NULL AND trigger_key LIKE '%@'||$2`, anviltest.ChainID, ga.Hash().Hex()),
		"A's runs are orphaned, their keys qualified with A's genesis")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM indexer.reorgs WHERE fork_block = 0 AND old_hash = $1 AND new_hash = $2`,
		ga.Hash().Hex(), gb.Hash().Hex()), "the replacement is recorded as a reorg from block 0")
	stop()
	b.Stop()

	// C has another chain id: the cursor B left (block ~19) is of chain
	// 31337 and beyond C's head (8).
	c := anviltest.Start(t, anviltest.Options{ChainID: 1337})
	ec := anviltest.DeployEmitter(t, c)
	for i := int64(0); i < 4; i++ {
		ec.Deposit(100 + i)
	}
	c.Mine(3)
	keysC := depositKeys(t, c, ec)
	startService(t, pool, identityConfig(t, c.URL, 1337, ec))
	eventually(t, 30*time.Second, "chain C claimed", func() bool { return len(liveKeys(t, pool, 1337)) == 4 })
	require.ElementsMatch(t, keysC, liveKeys(t, pool, 1337))
	require.Len(t, liveKeys(t, pool, anviltest.ChainID), 15, "B's runs are another chain's: untouched")
}

// A node restarted under a running service (a fresh chain with the same
// chain id) is detected while ingesting: the new chain's logs are claimed
// from the start block.
func TestNodeRestartedUnderServiceIsANewChain(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	e := anviltest.DeployEmitter(t, node)
	for i := int64(0); i < 3; i++ {
		e.Deposit(i)
	}
	node.Mine(20)
	startService(t, pool, identityConfig(t, node.URL, anviltest.ChainID, e))
	eventually(t, 30*time.Second, "first chain claimed", func() bool { return len(liveKeys(t, pool, anviltest.ChainID)) == 3 })

	time.Sleep(1100 * time.Millisecond) // another genesis timestamp, so another genesis hash
	node.Restart()
	e = anviltest.DeployEmitter(t, node)
	for i := int64(0); i < 6; i++ {
		e.Deposit(i)
	}
	node.Mine(3)
	keys := depositKeys(t, node, e)
	require.Len(t, keys, 6)
	eventually(t, 30*time.Second, "restarted chain claimed", func() bool {
		return len(liveKeys(t, pool, anviltest.ChainID)) == 6
	})
	require.ElementsMatch(t, keys, liveKeys(t, pool, anviltest.ChainID))
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	var out []string
	for _, x := range b {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}
